package dashboard

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/capmesh/capmesh/internal/nettest"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/jsonrpc/jhttp"
)

// TestComposeOfAnotherMachinesNodeDialsNoLocalEntry: `capmesh dashboard
// --node http://B`: a node at an address that is not this machine's
// lists a host on a Unix socket (dialable there). The composition page
// shows it without connecting to the socket of the same path here; a
// node on loopback, or one serving its own dashboard
// (NodeOnThisMachine), is this machine's and its host is asked.
func TestComposeOfAnotherMachinesNodeDialsNoLocalEntry(t *testing.T) {
	host := nettest.RoutableIPv4(t)
	sock := filepath.Join(t.TempDir(), "kv.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	conns := nettest.CountAccepts(t, ul)
	node := jsonrpc.NewServer(jsonrpc.Map{"ipc.list": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return map[string]any{"services": []map[string]any{{"primal_id": "kv", "endpoint": "unix://" + sock, "capabilities": []string{"kv.get"}, "trust": map[string]any{"trusted": true}, "dialable": true}}}, nil
	})}, nil)
	serve := func(addr string) string {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Skip(err)
		}
		hs := &http.Server{Handler: jhttp.Handler(node), ReadHeaderTimeout: 30 * time.Second}
		done := make(chan struct{})
		go func() { defer close(done); _ = hs.Serve(l) }()
		t.Cleanup(func() { hs.Close(); <-done })
		return "http://" + l.Addr().String()
	}
	remote, local := serve(net.JoinHostPort(host, "0")), serve("127.0.0.1:0")
	page := func(cfg Config) {
		t.Helper()
		d, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		ui := httptest.NewServer(d.Handler())
		defer ui.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ui.URL+Prefix+"/compose", nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("compose page: %s", res.Status)
		}
	}
	page(Config{Node: func() string { return remote }})
	if n := conns.Load(); n != 0 {
		t.Errorf("the page of a node at %s connected to this machine's %s %d time(s)", remote, sock, n)
	}
	page(Config{Node: func() string { return local }})
	if n := conns.Load(); n != 1 {
		t.Errorf("the page of the loopback node: %d connection(s), want 1", n)
	}
	page(Config{Node: func() string { return remote }, NodeOnThisMachine: true})
	if n := conns.Load(); n != 2 {
		t.Errorf("the page of a node serving its own dashboard: %d connection(s) in all, want 2", n)
	}
}
