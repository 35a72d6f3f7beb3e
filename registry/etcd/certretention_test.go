package etcd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/etcd"
	"github.com/capmesh/capmesh/registry/internal/state"
)

// TestExpiredCertificateRecordsLeaveEtcd: on a shared store a
// certificate's record carries a lease ending CertRetention after the
// certificate expires; when etcd ends it, every node forgets the
// certificate (its feed delivers the deletion). A certificate revoked
// for key_compromise has no lease: it stays, and its key stays blocked.
// Node a runs eight days behind, so that its certificates' records are
// due at once. Before, certificate records stayed in etcd and in every
// node's memory for good, one more for every renewal.
func TestExpiredCertificateRecordsLeaveEtcd(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	a, _ := joinHeldAt(t, srv, "/certgc/", func() time.Time { return time.Now().Add(-8*24*time.Hour - 2*time.Hour) })
	b, _ := joinHeld(t, srv, "/certgc/")

	_, old := nodeKey(t)
	_, compromised := nodeKey(t)
	for _, k := range []string{old, compromised} {
		if _, err := a.Enroll(ctx, k, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Revoke(ctx, "", compromised, registry.ReasonKeyCompromise); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(a.Certificates(old)) == 0 && len(b.Certificates(old)) == 0 })
	settle(t, srv, a, b)
	for i, p := range []*peer{a, b} {
		if got := p.Certificates(compromised); len(got) != 1 || got[0].RevocationReason != registry.ReasonKeyCompromise {
			t.Errorf("node %d: the compromised key's certificate %+v, want it kept", i, got)
		}
		if _, err := p.Enroll(ctx, compromised, nil, time.Hour); errWord(err) != "node_key_compromised" {
			t.Errorf("node %d: enrolment of the compromised key: %v, want node_key_compromised", i, err)
		}
	}
}

// TestRegistrationCheckedBeforeACompromiseOfAForgottenCertificate: node
// b, whose clock runs two hours past a certificate's retention, has
// forgotten that expired certificate of a key while its record still
// lives in etcd (its lease is the writer's, and a knows it still); b
// checks a descriptor of the key (trusted by a live certificate), then a
// revokes the forgotten certificate for key_compromise, which blocks the
// key for good, before b's write reaches etcd. b's write must lose.
// Before, a registration was conditional on the certificates the node
// held, and b's no longer named the one revoked: b stored a registration
// of a compromised key on every node. Now it is conditional on the key's
// keycerts record, which every revocation of a certificate of the key
// rewrites.
func TestRegistrationCheckedBeforeACompromiseOfAForgottenCertificate(t *testing.T) {
	srv := etcdtest.Start(t)
	a, _ := joinHeld(t, srv, "/forgotten/")
	ahead := func() time.Time { return time.Now().Add(state.CertRetention + 2*time.Hour) }
	b, hb := joinHeldAt(t, srv, "/forgotten/", ahead)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()

	priv, key := nodeKey(t)
	old, err := a.Enroll(ctx, key, nil, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Enroll(ctx, key, nil, 10*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	settle(t, srv, a, b)
	waitFor(t, func() bool { return len(b.Certificates(key)) == 1 }) // b's sweep forgot old
	if got := len(a.Certificates(key)); got != 2 {
		t.Fatalf("a holds %d certificates of the key, want 2", got)
	}

	release, done := registerHeld(ctx, t, b, hb, signedAt(t, priv, []string{"forgotten.comp"}, ahead(), 7105), false)
	_, err = a.Revoke(ctx, old.CertID, "", registry.ReasonKeyCompromise)
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; errWord(err) != registry.CodeWordConcurrentChange {
		t.Errorf("b's registration checked before the compromise: %v, want %s", err, registry.CodeWordConcurrentChange)
	}
	noneHolds(t, srv, key, "forgotten.comp", true, a, b)
}

// TestCertificateRecordsStoredWithoutExpiryGetOneOnEtcd: a node that
// loads certificate records stored before records had an expiry gives
// them theirs (a lease), but none to one revoked for key_compromise.
// Before, such records stayed in etcd for good.
func TestCertificateRecordsStoredWithoutExpiryGetOneOnEtcd(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	a := join(t, srv, "/legacycerts/", etcd.Options{})
	_, old := nodeKey(t)
	_, compromised := nodeKey(t)
	for _, k := range []string{old, compromised} {
		if _, err := a.Enroll(ctx, k, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Revoke(ctx, "", compromised, registry.ReasonKeyCompromise); err != nil {
		t.Fatal(err)
	}
	rs, err := a.st.List(ctx, "cert", time.Time{})
	if err != nil || len(rs) != 2 {
		t.Fatalf("%d certificate records (%v), want 2", len(rs), err)
	}
	for _, r := range rs { // as stored before records had an expiry
		r.ExpiresAt = time.Time{}
		if err := a.st.Apply(ctx, registry.Op{Record: r}); err != nil {
			t.Fatal(err)
		}
	}

	b := join(t, srv, "/legacycerts/", etcd.Options{}) // loaded once it returns
	rs, err = b.st.List(ctx, "cert", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		want := !strings.Contains(string(r.Value), registry.ReasonKeyCompromise)
		if got := !r.ExpiresAt.IsZero(); got != want {
			t.Errorf("record %s has an expiry: %v, want %v", r.Key, got, want)
		}
	}
	if _, err := b.Enroll(ctx, compromised, nil, time.Hour); errWord(err) != "node_key_compromised" {
		t.Errorf("enrolment of the compromised key: %v, want node_key_compromised", err)
	}
}
