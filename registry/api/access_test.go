package api

import (
	"testing"

	"github.com/capmesh/capmesh/access"
	"github.com/capmesh/capmesh/registry"
)

// TestEveryNodeMethodHasAnAccessOp: a method added to the node must be
// classified for the access policy on purpose (and added to the access
// matrix, cmd/capmesh TestAccessMatrix); only capability.call is an
// invocation by default.
func TestEveryNodeMethodHasAnAccessOp(t *testing.T) {
	n, err := registry.NewNode(registry.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	a := RPC(n).(*rpcAssigner)
	for _, m := range a.Names() {
		if _, ok := accessOps[m]; !ok && m != "capability.call" {
			t.Errorf("%s has no access operation: add it to accessOps (and to the access matrix)", m)
		}
	}
	if a.AccessOp("kv.get") != access.OpInvoke || a.AccessOp("registry.revoke") != access.OpAdminister {
		t.Error("routed calls must be invocations and registry.revoke administration")
	}
}
