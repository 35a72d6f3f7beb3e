// Package storetest is the behaviour every registry.Store must have. Each
// implementation runs Run from its own tests, so the in-memory store, the
// SQLite store and later etcd are held to one suite.
package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/capmesh/capmesh/registry"
)

// Factory opens a store. reopen closes nothing: Run closes the store it
// was given before calling Factory again with the same dir, to check
// durability; an ephemeral store reports durable=false.
type Factory func(t *testing.T, dir string) registry.Store

// Run runs the suite. durable says whether data must survive Close and a
// new Factory call on the same dir.
func Run(t *testing.T, open Factory, durable bool) {
	checks := []struct {
		name string
		f    func(*testing.T, Factory)
	}{
		{"PutListDelete", putListDelete},
		{"ExpiryHiddenThenPurged", expiryHiddenThenPurged},
		{"ApplyIsAtomicAndOrdered", applyIsAtomicAndOrdered},
		{"ValuesAreCopied", valuesAreCopied},
	}
	if durable {
		checks = append(checks, struct {
			name string
			f    func(*testing.T, Factory)
		}{"SurvivesReopen", survivesReopen})
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) { c.f(t, open) })
	}
}

// t0 is the suite's clock; records compare with equal instants.
var (
	t0     = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	cmpRec = cmp.Options{cmpopts.EquateEmpty(), cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })}
)

// putListDelete: the store puts, lists in key order by kind and deletes.
func putListDelete(t *testing.T, open Factory) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	defer s.Close()
	recs := []registry.Record{
		{Kind: "descriptor", Key: "b", Value: []byte(`{"n":2}`), ExpiresAt: t0.Add(time.Minute)},
		{Kind: "descriptor", Key: "a", Value: []byte(`{"n":1}`)},
		{Kind: "cert", Key: "a", Value: []byte(`{}`)},
	}
	for _, r := range recs {
		if err := s.Apply(ctx, registry.Op{Record: r}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.List(ctx, "descriptor", t0)
	if err != nil {
		t.Fatal(err)
	}
	want := []registry.Record{recs[1], recs[0]}
	if diff := cmp.Diff(want, got, cmpRec); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	// Replace keeps one record per key.
	r := recs[0]
	r.Value = []byte(`{"n":3}`)
	if err := s.Apply(ctx, registry.Op{Record: r}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.List(ctx, "descriptor", t0)
	if len(got) != 2 || string(got[1].Value) != `{"n":3}` {
		t.Errorf("after replace: %+v", got)
	}
	if err := s.Apply(ctx, registry.Op{Record: registry.Record{Kind: "descriptor", Key: "a"}, Delete: true}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.List(ctx, "descriptor", t0)
	if len(got) != 1 || got[0].Key != "b" {
		t.Errorf("after delete: %+v", got)
	}
	// Deleting a missing key is not an error.
	if err := s.Apply(ctx, registry.Op{Record: registry.Record{Kind: "descriptor", Key: "zz"}, Delete: true}); err != nil {
		t.Errorf("delete missing: %v", err)
	}
	other, _ := s.List(ctx, "cert", t0)
	if len(other) != 1 {
		t.Errorf("kinds are not separate: %+v", other)
	}
}

// expiryHiddenThenPurged: the store hides an expired record from List and deletes it in Purge.
func expiryHiddenThenPurged(t *testing.T, open Factory) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	defer s.Close()
	exp := t0.Add(90 * time.Second)
	_ = s.Apply(ctx,
		registry.Op{Record: registry.Record{Kind: "local", Key: "x", Value: []byte("1"), ExpiresAt: exp}},
		registry.Op{Record: registry.Record{Kind: "local", Key: "y", Value: []byte("2")}})
	if got, _ := s.List(ctx, "local", exp.Add(-time.Nanosecond)); len(got) != 2 {
		t.Errorf("before expiry: %d records", len(got))
	}
	// Half-open: dead at exactly ExpiresAt, before any purge ran.
	if got, _ := s.List(ctx, "local", exp); len(got) != 1 || got[0].Key != "y" {
		t.Errorf("at expiry: %+v", got)
	}
	n, err := s.Purge(ctx, exp)
	if err != nil || n != 1 {
		t.Errorf("Purge = %d, %v; want 1", n, err)
	}
	if got, _ := s.List(ctx, "local", t0); len(got) != 1 {
		t.Errorf("after purge, even at an earlier now: %+v", got)
	}
}

// applyIsAtomicAndOrdered: the store applies a batch in order, all or nothing.
func applyIsAtomicAndOrdered(t *testing.T, open Factory) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	defer s.Close()
	err := s.Apply(ctx,
		registry.Op{Record: registry.Record{Kind: "k", Key: "1", Value: []byte("a")}},
		registry.Op{Record: registry.Record{Kind: "k", Key: "1"}, Delete: true},
		registry.Op{Record: registry.Record{Kind: "k", Key: "2", Value: []byte("b")}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := s.List(ctx, "k", t0)
	if len(got) != 1 || got[0].Key != "2" {
		t.Errorf("ops not applied in order: %+v", got)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Apply(cctx, registry.Op{Record: registry.Record{Kind: "k", Key: "3"}}); err == nil {
		t.Error("Apply with a cancelled context succeeded")
	}
}

// valuesAreCopied: the store keeps its own copy of the values it is given and returns.
func valuesAreCopied(t *testing.T, open Factory) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	defer s.Close()
	v := []byte("abc")
	_ = s.Apply(ctx, registry.Op{Record: registry.Record{Kind: "k", Key: "1", Value: v}})
	v[0] = 'X'
	got, _ := s.List(ctx, "k", t0)
	if string(got[0].Value) != "abc" {
		t.Errorf("store kept the caller's slice: %q", got[0].Value)
	}
}

// survivesReopen: the store keeps its records across Close and a new Factory call.
func survivesReopen(t *testing.T, open Factory) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	var ops []registry.Op
	for i := 0; i < 100; i++ {
		ops = append(ops, registry.Op{Record: registry.Record{Kind: "descriptor", Key: fmt.Sprintf("k%03d", i), Value: []byte(fmt.Sprint(i)), ExpiresAt: t0.Add(time.Hour)}})
	}
	ops = append(ops, registry.Op{Record: registry.Record{Kind: "crl", Key: "active", Value: []byte(`{"sequence":3}`)}})
	if err := s.Apply(ctx, ops...); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	defer s.Close()
	got, err := s.List(ctx, "descriptor", t0)
	if err != nil || len(got) != 100 || string(got[42].Value) != "42" || !got[42].ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("after reopen: %d records, err %v", len(got), err)
	}
	crl, _ := s.List(ctx, "crl", t0)
	if len(crl) != 1 || string(crl[0].Value) != `{"sequence":3}` {
		t.Errorf("crl after reopen: %+v", crl)
	}
}
