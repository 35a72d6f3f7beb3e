package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/registry"
)

// TestFarExpiryStaysLiveOnOtherNodes: a record expiring in the year 3000
// (a descriptor signed for a millennium) is written, given a lease, and
// read by another node as live — at the latest expiry etcd's framing
// holds (2262) — not as expired in 1970.
func TestFarExpiryStaysLiveOnOtherNodes(t *testing.T) {
	srv := etcdtest.Start(t)
	w, r := open(t, srv, "far"), open(t, srv, "far")
	defer w.Close()
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	exp := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := w.Apply(ctx, registry.Op{Record: registry.Record{Kind: "descriptor", Key: "k", Value: []byte(`{}`), ExpiresAt: exp, Machine: "m1"}}); err != nil {
		t.Fatal(err)
	}
	recs, err := r.List(ctx, "descriptor", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].ExpiresAt.Year() != 2262 || recs[0].Machine != "m1" {
		t.Fatalf("another node lists %+v, want the record expiring in 2262", recs)
	}
}
