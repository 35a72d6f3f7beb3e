package compose_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/capmesh/capmesh/compose"
	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/internal/nettest"
	"github.com/capmesh/capmesh/jsonrpc"
)

// TestFromRegistrySkipsWhatThisMachineMayNotDial: an entry the registry
// marks "dialable": false is listed, not live, and not connected to; an
// entry whose endpoint is a name resolving to this machine's loopback is
// not connected to either (nothing says it was registered here); one at
// a literal loopback address the registry lets this machine dial is.
func TestFromRegistrySkipsWhatThisMachineMayNotDial(t *testing.T) {
	dir := t.TempDir()
	ul, err := net.Listen("unix", filepath.Join(dir, "elsewhere.sock"))
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := nettest.CountAccepts(t, ul)
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	here := nettest.CountAccepts(t, tl)
	port := strconv.Itoa(tl.Addr().(*net.TCPAddr).Port)
	trusted := map[string]any{"trusted": true}
	services := []map[string]any{
		{"primal_id": "elsewhere", "endpoint": "unix://" + ul.Addr().String(), "trust": trusted, "dialable": false},
		{"primal_id": "here", "endpoint": "tcp://127.0.0.1:" + port, "trust": trusted},
	}
	name := ""
	if h, err := os.Hostname(); err == nil {
		for _, n := range []string{h, "vm", "runsc"} {
			if addrs, err := net.LookupHost(n); err == nil && len(addrs) > 0 && net.ParseIP(addrs[0]).IsLoopback() {
				name = n
				break
			}
		}
	}
	if name != "" {
		services = append(services, map[string]any{"primal_id": "named", "endpoint": "tcp://" + net.JoinHostPort(name, port), "trust": trusted})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg := listRegistry(t, ctx, filepath.Join(dir, "node.sock"), services)
	hosts, err := compose.FromRegistry(ctx, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != len(services) {
		t.Fatalf("%d hosts, want %d (every entry listed)", len(hosts), len(services))
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("an entry marked \"dialable\": false was connected to %d time(s)", n)
	}
	// "here" connects once; "named" (same port, through a name) must not
	if n := here.Load(); n != 1 {
		t.Errorf("the loopback listener saw %d connection(s), want 1 (the literal loopback entry only)", n)
	}
}

// TestFromRegistryOfAnotherMachineDialsNoLocalEntry: the entries of a
// registry of another machine (endpoint.RegistryAnswers of its address:
// RefuseLocal) that are local-only by their text — a Unix socket, a
// loopback address, both marked dialable, as they are on that machine —
// are listed, not live, and not connected to: here they would reach this
// machine's services of the same address. From this machine's own
// registry the same entries are dialled.
func TestFromRegistryOfAnotherMachineDialsNoLocalEntry(t *testing.T) {
	dir := t.TempDir()
	ul, err := net.Listen("unix", filepath.Join(dir, "kv.sock"))
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg := listRegistry(t, ctx, filepath.Join(dir, "node.sock"), services)
	hosts, err := compose.FromRegistry(endpoint.RegistryAnswers(ctx, "tcp://198.51.100.7:7070"), reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != len(services) {
		t.Fatalf("%d hosts, want %d (every entry listed)", len(hosts), len(services))
	}
	for _, h := range hosts {
		if h.Live {
			t.Errorf("%s (%s) is live through another machine's registry", h.Name, h.Endpoint)
		}
	}
	if s, l := sockConns.Load(), loopConns.Load(); s != 0 || l != 0 {
		t.Errorf("another machine's entries reached this machine: %d socket, %d loopback connection(s)", s, l)
	}
	// This machine's registry (over its Unix socket): both are dialled.
	if _, err := compose.FromRegistry(endpoint.RegistryAnswers(ctx, filepath.Join(dir, "node.sock")), reg, nil); err != nil {
		t.Fatal(err)
	}
	if s, l := sockConns.Load(), loopConns.Load(); s != 1 || l != 1 {
		t.Errorf("this machine's registry: %d socket, %d loopback connection(s), want 1 each", s, l)
	}
}

// listRegistry serves ipc.list answering services on a Unix socket at
// path until the test ends, and returns a client of it.
func listRegistry(t *testing.T, ctx context.Context, path string, services []map[string]any) *jsonrpc.Client {
	t.Helper()
	srv := jsonrpc.NewServer(jsonrpc.Map{"ipc.list": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return map[string]any{"services": services}, nil
	})}, nil)
	rl, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(sctx, rl) }()
	t.Cleanup(func() { scancel(); <-done })
	reg, err := jsonrpc.Dial(ctx, "unix", rl.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return reg
}
