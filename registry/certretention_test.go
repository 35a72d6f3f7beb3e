package registry_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/sqlite"
)

// TestExpiredCertificatesLeave: a certificate's record leaves the store
// and the node's memory CertRetention after the certificate expires, so
// that renewals do not pile up records for good; one revoked for
// key_compromise stays, and its key stays blocked, across a restart too.
// Before, every certificate ever issued stayed in the store and in memory.
func TestExpiredCertificatesLeave(t *testing.T) {
	f := newClockedFile(t)
	n := f.open()
	ctx := t.Context()
	renewed, compromised := newKey(), newKey()
	for range 3 {
		if _, err := n.Enroll(ctx, renewed, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.Enroll(ctx, compromised, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Revoke(ctx, "", compromised, registry.ReasonKeyCompromise); err != nil {
		t.Fatal(err)
	}

	f.clock.Add(int64(time.Hour + 6*24*time.Hour)) // expired, within retention
	n.Sweep(ctx)
	if got := len(n.Certificates(renewed)); got != 3 {
		t.Fatalf("%d certificates a day after their expiry, want 3 (kept for a week)", got)
	}
	f.clock.Add(int64(24*time.Hour + time.Second))
	n.Sweep(ctx)
	check := func(n *registry.Node, when string) {
		t.Helper()
		if got := n.Certificates(renewed); len(got) != 0 {
			t.Errorf("%s: %d certificates a week after their expiry, want none", when, len(got))
		}
		if got := n.Certificates(compromised); len(got) != 1 || got[0].RevocationReason != registry.ReasonKeyCompromise {
			t.Errorf("%s: the compromised key's certificate: %+v, want it kept", when, got)
		}
		var re *registry.Error
		if _, err := n.Enroll(ctx, compromised, nil, time.Hour); !errors.As(err, &re) || re.Code != "node_key_compromised" {
			t.Errorf("%s: enrolment of the compromised key: %v, want node_key_compromised", when, err)
		}
	}
	check(n, "after the sweep")
	if rs, err := f.st.List(ctx, "cert", time.Time{}); err != nil || len(rs) != 1 {
		t.Errorf("the store holds %d certificate records after the sweep (%v), want 1", len(rs), err)
	}
	n.Close()
	check(f.open(), "after a restart")
}

// TestCertificateRecordsStoredWithoutExpiryLeave: certificate records
// stored before records had an expiry (none) are given theirs when a
// node loads them, so that they leave the store CertRetention after
// their certificate like the others; one revoked for key_compromise
// keeps none, and its key stays blocked. Before, the node forgot them
// in its sweep but the store kept them for good, and every start
// loaded them again.
func TestCertificateRecordsStoredWithoutExpiryLeave(t *testing.T) {
	f := newClockedFile(t)
	n := f.open()
	ctx := t.Context()
	old, compromised := newKey(), newKey()
	for _, k := range []string{old, compromised} {
		if _, err := n.Enroll(ctx, k, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.Revoke(ctx, "", compromised, registry.ReasonKeyCompromise); err != nil {
		t.Fatal(err)
	}
	n.Close()
	rs, err := f.st.List(ctx, "cert", time.Time{})
	if err != nil || len(rs) != 2 {
		t.Fatalf("%d certificate records (%v), want 2", len(rs), err)
	}
	for _, r := range rs { // as stored before records had an expiry
		r.ExpiresAt = time.Time{}
		if err := f.st.Apply(ctx, registry.Op{Record: r}); err != nil {
			t.Fatal(err)
		}
	}
	f.st.Close()

	n = f.open()
	f.clock.Add(int64(time.Hour + 7*24*time.Hour + time.Second))
	n.Sweep(ctx)
	if got := n.Certificates(old); len(got) != 0 {
		t.Errorf("%d certificates of the expired key a week after their expiry, want none", len(got))
	}
	if rs, err := f.st.List(ctx, "cert", time.Time{}); err != nil || len(rs) != 1 || !rs[0].ExpiresAt.IsZero() {
		t.Errorf("the store holds %d certificate records after the sweep (%v), want the compromised key's, without expiry", len(rs), err)
	}
	n.Close()
	n = f.open()
	var re *registry.Error
	if _, err := n.Enroll(ctx, compromised, nil, time.Hour); !errors.As(err, &re) || re.Code != "node_key_compromised" {
		t.Errorf("enrolment of the compromised key after a restart: %v, want node_key_compromised", err)
	}
	if got := n.Certificates(old); len(got) != 0 {
		t.Errorf("%d certificates of the expired key after a restart, want none", len(got))
	}
}

// clockedFile starts nodes on one SQLite file with a clock the test
// moves (clock, in Unix nanoseconds); st is the last node's store.
type clockedFile struct {
	t     *testing.T
	path  string
	clock atomic.Int64
	st    *sqlite.Store
}

func newClockedFile(t *testing.T) *clockedFile {
	f := &clockedFile{t: t, path: filepath.Join(t.TempDir(), "registry.db")}
	f.clock.Store(time.Now().UnixNano())
	return f
}

// open starts a node on the file (again after a restart).
func (f *clockedFile) open() *registry.Node {
	f.t.Helper()
	st, err := sqlite.Open(f.path)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { st.Close() })
	f.st = st
	now := func() time.Time { return time.Unix(0, f.clock.Load()) }
	return newNode(f.t, registry.Config{Network: "N", Store: st, Now: now, SweepInterval: time.Hour, Logger: quiet})
}

// newKey is a fresh node public key, in standard base64.
func newKey() string {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	return base64.StdEncoding.EncodeToString(pub)
}
