package etcd_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/etcd"
)

// TestLocalRegistrationWhileTheNodeLeaseIsLost: etcd ended the node's
// lease (the node was cut off longer than node_ttl) and the node has not
// replaced it yet. A local registration then must fail with the
// retryable registry_store_unavailable: before, etcd's "requested lease
// not found" came through as it was, an internal error. Once the node
// replaced its lease (and claimed its id again), it registers.
func TestLocalRegistrationWhileTheNodeLeaseIsLost(t *testing.T) {
	srv := etcdtest.Start(t)
	a := join(t, srv, "/leaselost/", etcd.Options{NodeID: "node-a", NodeTTL: 15 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	claim, err := a.st.Client().Get(ctx, "/leaselost/node/node-a")
	if err != nil || len(claim.Kvs) != 1 {
		t.Fatalf("the node's claim: %+v, %v", claim, err)
	}
	if _, err := a.st.Client().Revoke(ctx, clientv3.LeaseID(claim.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	reg := registry.LocalRegistration{Name: "beardog", Capabilities: []string{"crypto.sign"}, Endpoint: fakeHost(t, "beardog")}
	_, _, err = a.RegisterLocal(ctx, localPeer(), reg)
	if err != nil && errWord(err) != registry.CodeWordStoreUnavailable {
		t.Errorf("a local registration while the node's lease is lost: %v, want %s", err, registry.CodeWordStoreUnavailable)
	}
	waitFor(t, func() bool { // the id claimed again, on the new lease
		c, err := a.st.Client().Get(ctx, "/leaselost/node/node-a")
		return err == nil && len(c.Kvs) == 1
	})
	if _, _, err := a.RegisterLocal(ctx, localPeer(), reg); err != nil {
		t.Errorf("a local registration once the lease is replaced: %v", err)
	}
}
