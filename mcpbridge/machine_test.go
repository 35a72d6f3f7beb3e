package mcpbridge

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/internal/nettest"
	"github.com/capmesh/capmesh/jsonrpc"
)

// TestNodeCapabilitiesSkipsWhatThisMachineMayNotDial: a provider the
// node marks "dialable": false, and one whose endpoint is a name that
// resolves to this machine's loopback (nothing says it was registered
// here), are never dialled; a provider at a literal address is.
func TestNodeCapabilitiesSkipsWhatThisMachineMayNotDial(t *testing.T) {
	ctx := testCtx(t)
	trusted := map[string]any{"trusted": true}
	services := []map[string]any{
		{"primal_id": "elsewhere", "endpoint": "unix:///run/elsewhere.sock", "trust": trusted, "dialable": false},
		{"primal_id": "literal", "endpoint": "tcp://127.0.0.1:9", "trust": trusted},
	}
	want := map[string]bool{"tcp://127.0.0.1:9": true}
	if h, err := os.Hostname(); err == nil {
		for _, n := range []string{h, "vm", "runsc"} {
			if addrs, err := net.LookupHost(n); err == nil && len(addrs) > 0 && net.ParseIP(addrs[0]).IsLoopback() {
				services = append(services, map[string]any{"primal_id": "named", "endpoint": "tcp://" + n + ":9", "trust": trusted})
				break
			}
		}
	}
	node := fakeNode(t, services)
	up := NewUpstream("unix", node)
	defer up.Close()
	var mu sync.Mutex
	dialled := map[string]bool{}
	dial := func(_ context.Context, ep string) (jsonrpc.Caller, error) {
		mu.Lock()
		defer mu.Unlock()
		dialled[ep] = true
		return nil, errors.New("not dialled in this test")
	}
	if _, err := NodeCapabilities(ctx, up, dial, quietLogger()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialled) != len(want) || !dialled["tcp://127.0.0.1:9"] {
		t.Errorf("dialled %v, want only %v", dialled, want)
	}
}

// servedList serves ipc.list answering services on l until the test ends.
func servedList(t *testing.T, l net.Listener, services []map[string]any) {
	t.Helper()
	srv := jsonrpc.NewServer(jsonrpc.Map{"ipc.list": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return map[string]any{"services": services}, nil
	})}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx, l) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestNodeCapabilitiesOfAnotherMachineDialsNoLocalEntry: `capmesh mcp
// --tcp B:PORT` against a node at an address that is not this machine's:
// a provider it lists on a Unix socket or at loopback (dialable there) is
// that machine's, and is left out without connecting to the socket or
// port of the same address here. The same node on loopback is this
// machine's: its providers are dialled.
func TestNodeCapabilitiesOfAnotherMachineDialsNoLocalEntry(t *testing.T) {
	host := nettest.RoutableIPv4(t)
	ctx := testCtx(t)
	ul, err := net.Listen("unix", filepath.Join(shortDir(t), "kv.sock"))
	if err != nil {
		t.Fatal(err)
	}
	sockConns := nettest.CountAccepts(t, ul)
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	loopConns := nettest.CountAccepts(t, tl)
	trusted := map[string]any{"trusted": true}
	services := []map[string]any{
		{"primal_id": "kv", "endpoint": "unix://" + ul.Addr().String(), "trust": trusted, "dialable": true},
		{"primal_id": "loop", "endpoint": "tcp://" + tl.Addr().String(), "trust": trusted, "dialable": true},
	}
	remote, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Skip(err)
	}
	servedList(t, remote, services)
	up := NewUpstream("tcp", remote.Addr().String())
	defer up.Close()
	if caps, err := NodeCapabilities(ctx, up, nil, quietLogger()); err != nil || len(caps) != 0 {
		t.Fatalf("another machine's node: %v, %v", caps, err)
	}
	if s, l := sockConns.Load(), loopConns.Load(); s != 0 || l != 0 {
		t.Errorf("another machine's providers reached this machine: %d socket, %d loopback connection(s)", s, l)
	}
	local, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	servedList(t, local, services)
	lup := NewUpstream("tcp", local.Addr().String())
	defer lup.Close()
	if _, err := NodeCapabilities(ctx, lup, nil, quietLogger()); err != nil {
		t.Fatal(err)
	}
	if s, l := sockConns.Load(), loopConns.Load(); s != 1 || l != 1 {
		t.Errorf("this machine's node: %d socket, %d loopback connection(s), want 1 each", s, l)
	}
}

// TestDialNeverReachesThisMachineThroughAName: the default DialFunc
// connects to a provider whose endpoint is not local-only by its text
// through the guarded dialler: a name resolving to this machine's
// loopback is refused without a connection (tcp:// and http://), while
// the literal loopback address of this machine's own provider is
// dialled as before.
func TestDialNeverReachesThisMachineThroughAName(t *testing.T) {
	name := ""
	if h, err := os.Hostname(); err == nil {
		for _, n := range []string{h, "vm", "runsc"} {
			if addrs, err := net.LookupHost(n); err == nil && len(addrs) > 0 && net.ParseIP(addrs[0]).IsLoopback() {
				name = n
				break
			}
		}
	}
	if name == "" {
		t.Skip("no host name resolving to loopback here")
	}
	ctx := testCtx(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := nettest.CountAccepts(t, l)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	if c, err := Dial(ctx, "tcp://"+net.JoinHostPort(name, port)); !errors.Is(err, endpoint.ErrLocalDestination) {
		if c != nil {
			c.Close()
		}
		t.Errorf("tcp:// through %s: %v, want ErrLocalDestination", name, err)
	}
	c, err := Dial(ctx, "http://"+net.JoinHostPort(name, port)+"/jsonrpc")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx, "chp.describe", nil, nil); !errors.Is(err, endpoint.ErrLocalDestination) {
		t.Errorf("http:// through %s: %v, want ErrLocalDestination", name, err)
	}
	c.Close()
	if n := conns.Load(); n != 0 {
		t.Errorf("a name leading to this machine was connected to %d time(s)", n)
	}
	c, err = Dial(ctx, "tcp://127.0.0.1:"+port)
	if err != nil {
		t.Fatalf("this machine's own provider at its literal address: %v", err)
	}
	c.Close()
}
