package etcd_test

import (
	"context"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/registry"
)

// TestLocalRefusalNamesNoMachine: the endpoint_is_local refusal a caller
// gets (a routed call, ipc.resolve) names neither the provider's machine
// nor the node's: machine identities are the fleet's business, not a
// caller's.
func TestLocalRefusalNamesNoMachine(t *testing.T) {
	srv := etcdtest.Start(t)
	a, _ := joinOn(t, srv, "/ids/", "machine-one-id")
	b, cb := joinOn(t, srv, "/ids/", "machine-two-id")
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	sockL := listen(t, "unix", "")
	countingHost(t, "beardog", sockL)
	if _, _, err := a.RegisterLocal(ctx, localPeer(), registry.LocalRegistration{Name: "beardog", Capabilities: []string{"crypto.sign"}, Endpoint: sockL.Addr().String()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(b.Find("crypto.sign", registry.FindOptions{})) == 1 })
	for _, call := range []struct {
		method string
		params map[string]any
	}{{"crypto.sign", map[string]any{}}, {"ipc.resolve", map[string]any{"capability": "crypto.sign"}}} {
		err := cb.Call(ctx, call.method, call.params, nil)
		if err == nil || !strings.Contains(err.Error(), "another machine") {
			t.Fatalf("%s on machine 2: %v, want the endpoint_is_local refusal", call.method, err)
		}
		if strings.Contains(err.Error(), "machine-one-id") || strings.Contains(err.Error(), "machine-two-id") {
			t.Errorf("%s on machine 2: the refusal names a machine: %v", call.method, err)
		}
	}
}
