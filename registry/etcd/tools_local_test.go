package etcd_test

import (
	"context"
	"testing"

	"github.com/capmesh/capmesh/compose"
	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/mcpbridge"
	"github.com/capmesh/capmesh/registry"
)

// TestToolsSkipEntriesLocalElsewhere: node b (machine 2) lists a Unix
// socket registered on machine 1 with "dialable": false, and the tools
// fed by its ipc.list — the dashboard's graph and capmesh audit
// (compose.FromRegistry), capmesh mcp (mcpbridge.NodeCapabilities) — do
// not connect to it: on machine 2 that socket path is machine 2's own.
// The entry still shows in the graph, not live.
func TestToolsSkipEntriesLocalElsewhere(t *testing.T) {
	srv := etcdtest.Start(t)
	a, ca := joinOn(t, srv, "/tools/", "machine-1")
	b, cb := joinOn(t, srv, "/tools/", "machine-2")
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	sockL := listen(t, "unix", "")
	conns := countingHost(t, "beardog", sockL)
	if _, _, err := a.RegisterLocal(ctx, localPeer(), registry.LocalRegistration{Name: "beardog", Capabilities: []string{"crypto.sign"}, Endpoint: sockL.Addr().String()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(b.Find("crypto.sign", registry.FindOptions{})) == 1 })
	before := conns.Load()
	hosts, err := compose.FromRegistry(ctx, cb, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != 1 || hosts[0].Name != "beardog" || hosts[0].Live {
		t.Errorf("compose.FromRegistry via b: %+v, want beardog listed, not live", hosts)
	}
	if d := conns.Load() - before; d > 0 {
		t.Errorf("compose.FromRegistry (dashboard graph) on machine 2 connected %d time(s) to a socket registered on machine 1", d)
	}
	before = conns.Load()
	caps, err := mcpbridge.NodeCapabilities(ctx, cb, nil, quiet)
	if err != nil || len(caps) != 0 {
		t.Errorf("mcpbridge.NodeCapabilities via b: %v, %v; want none", caps, err)
	}
	if d := conns.Load() - before; d > 0 {
		t.Errorf("mcpbridge.NodeCapabilities on machine 2 connected %d time(s) to a socket registered on machine 1 (err %v)", d, err)
	}
	// control: on machine 1 the tools do connect to it
	before = conns.Load()
	if _, err := compose.FromRegistry(ctx, ca, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := mcpbridge.NodeCapabilities(ctx, ca, nil, quiet); err != nil {
		t.Fatal(err)
	}
	if d := conns.Load() - before; d != 2 {
		t.Errorf("the tools via a on machine 1 connected %d time(s), want 2", d)
	}
}
