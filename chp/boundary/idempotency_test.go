package boundary

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/logstore"
)

// TestIdempotencyConflict: an invocation_id reused for a different request
// (payload, capability, version, mode or caller) is denied with
// io.github.capmesh.idempotency_conflict — the handler does not run and the
// recorded result is not replaced — while the same request, however it is
// spelled, replays the recorded result; also after a restart on a durable
// store.
func TestIdempotencyConflict(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ev")
	var calls atomic.Int32
	start := func() (*Boundary, evidence.Store) {
		t.Helper()
		st, err := logstore.Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := New(Config{HostID: "idem-host", Store: st})
		if err != nil {
			t.Fatal(err)
		}
		echo := func(_ context.Context, p json.RawMessage) (json.RawMessage, error) { calls.Add(1); return p, nil }
		for _, id := range []string{"kv.put", "kv.other"} {
			if err := b.Register(Capability{Descriptor: chp.CapabilityDescriptor{ID: id, Version: "1.0.0", Description: "x"}, Handler: echo}); err != nil {
				t.Fatal(err)
			}
		}
		return b, st
	}
	ctx := context.Background()
	invoke := func(b *Boundary, wire string) *chp.InvocationResult {
		t.Helper()
		env, err := chp.ParseEnvelope([]byte(wire))
		if err != nil {
			t.Fatal(err)
		}
		res, err := b.Invoke(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	const original = `{"capability_id":"kv.put","invocation_id":"dup-1","correlation_id":"c1","payload":{"k":"a","n":1}}`
	same := []string{
		original,
		// Key order, whitespace, another correlation, an explicit version.
		`{ "invocation_id" : "dup-1", "payload" : {"n":1, "k":"a"}, "capability_id":"kv.put", "correlation_id":"c2", "version":null}`,
	}
	conflicting := []string{
		`{"capability_id":"kv.put","invocation_id":"dup-1","payload":{"k":"b","n":1}}`,
		`{"capability_id":"kv.other","invocation_id":"dup-1","payload":{"k":"a","n":1}}`,
		`{"capability_id":"kv.put","invocation_id":"dup-1","payload":{"k":"a","n":1},"version":"1.0.0"}`,
		`{"capability_id":"kv.put","invocation_id":"dup-1","payload":{"k":"a","n":1},"requested_capability_version":"^1"}`,
		`{"capability_id":"kv.put","invocation_id":"dup-1","payload":{"k":"a","n":1},"subject":{"id":"mallory","type":"user"}}`,
	}
	b, st := start()
	first := invoke(b, original)
	if !first.Success || first.Replayed || calls.Load() != 1 {
		t.Fatalf("first call: %+v", first)
	}
	check := func(b *Boundary) {
		t.Helper()
		for _, w := range same {
			if r := invoke(b, w); !r.Replayed || string(r.Data) != string(first.Data) {
				t.Errorf("same request %s: %+v", w, r)
			}
		}
		for _, w := range conflicting {
			r := invoke(b, w)
			if r.Outcome != chp.OutcomeDenied || r.Denial == nil || r.Denial.Code != chp.CodeIdempotencyConflict || r.Replayed || r.Denial.Retryable {
				t.Errorf("conflicting request %s: %+v %+v", w, r, r.Denial)
			}
		}
		if calls.Load() != 1 {
			t.Errorf("the handler ran %d times", calls.Load())
		}
		// The conflicts replaced nothing: the id still replays its result.
		if r := invoke(b, original); !r.Replayed || string(r.Data) != string(first.Data) {
			t.Errorf("after the conflicts: %+v", r)
		}
	}
	check(b)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	b, st = start()
	defer st.Close()
	check(b)
}
