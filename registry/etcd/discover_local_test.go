package etcd_test

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/api"
	"github.com/capmesh/capmesh/registry/etcd"
)

// TestDiscoverNeverFallsBackAfterLocalRefusal: a client on machine 2
// whose registry (DISCOVERY_SOCKET: not a capmesh-named socket, so the
// client resolves and connects itself) is node b asks endpoint.Discover
// for a capability whose only provider is a Unix socket registered on
// machine 1. ipc.resolve refuses it (endpoint_is_local), and Discover
// stops there: before, it asked ipc.find_capability and connected to the
// socket anyway — on machine 2, machine 2's own socket. The discover
// family marks the entry "dialable": false.
func TestDiscoverNeverFallsBackAfterLocalRefusal(t *testing.T) {
	srv := etcdtest.Start(t)
	a, _ := joinOn(t, srv, "/disc/", "machine-1")
	// node b (machine 2) served on a Unix socket that Discover will ask
	st, err := etcd.Open(context.Background(), etcd.Options{Endpoints: srv.Endpoints(), Prefix: "/disc/", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	b, err := registry.NewNode(registry.Config{Store: st, Logger: quiet, Machine: "machine-2"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(); st.Close() })
	bl := listen(t, "unix", "")
	rpc := jsonrpc.NewServer(api.RPC(b), nil)
	sctx, scancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = rpc.Serve(sctx, bl) }()
	t.Cleanup(func() { scancel(); <-done })

	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	sockL := listen(t, "unix", "")
	conns := countingHost(t, "beardog", sockL)
	if _, _, err := a.RegisterLocal(ctx, localPeer(), registry.LocalRegistration{Name: "beardog", Capabilities: []string{"crypto.sign"}, Endpoint: sockL.Addr().String()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(b.Find("crypto.sign", registry.FindOptions{})) == 1 })

	dir, _ := os.MkdirTemp("", "cm-disc-")
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Setenv("BIOMEOS_SOCKET_DIR", dir)
	t.Setenv("DISCOVERY_SOCKET", bl.Addr().(*net.UnixAddr).Name)
	t.Setenv("FAMILY_ID", "")
	before := conns.Load()
	c, f, err := endpoint.Discover(ctx, endpoint.Query{Method: "crypto.sign", ProbeTimeout: 10 * time.Second})
	if err == nil {
		c.Close()
		t.Errorf("endpoint.Discover on machine 2 found %s via %q: a socket registered on machine 1", f.Addr, f.Via)
	} else if !strings.Contains(err.Error(), "endpoint_is_local") && !strings.Contains(err.Error(), "reaches only the machine") {
		t.Errorf("endpoint.Discover on machine 2: %v, want the registry's endpoint_is_local refusal", err)
	}
	if d := conns.Load() - before; d != 0 {
		t.Errorf("the provider saw %d connection(s) from machine 2", d)
	}
	bc, err := jsonrpc.Dial(ctx, "unix", bl.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	for _, m := range []string{"ipc.discover", "ipc.find_capability", "capability.discover", "discovery.find_by_capability"} {
		var res struct {
			Providers []map[string]any `json:"providers"`
		}
		if err := bc.Call(ctx, m, map[string]any{"capability": "crypto.sign"}, &res); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if len(res.Providers) != 1 || res.Providers[0]["dialable"] != false {
			t.Errorf("%s on machine 2: %v, want the provider marked \"dialable\": false", m, res.Providers)
		}
	}
}
