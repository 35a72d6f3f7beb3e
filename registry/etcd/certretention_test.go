package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/etcd"
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
	st, err := etcd.Open(ctx, etcd.Options{Endpoints: srv.Endpoints(), Prefix: "/certgc/", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	behind := func() time.Time { return time.Now().Add(-8*24*time.Hour - 2*time.Hour) }
	n, err := registry.NewNode(registry.Config{Store: st, Logger: quiet, SweepInterval: 100 * time.Millisecond, Now: behind})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	a := &peer{Node: n, st: st}
	t.Cleanup(func() { a.Close(); _ = st.Close() })
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
