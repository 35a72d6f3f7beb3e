package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/capmesh/capmesh/jsonrpc"
)

// discoverEnv gives the test its own socket directory (no node runs in
// it) and clears the variables discovery reads.
func discoverEnv(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cmdisc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Setenv("BIOMEOS_SOCKET_DIR", dir)
	for _, k := range []string{"FAMILY_ID", "DISCOVERY_SOCKET", "KV_SOCKET", "KVHOST_SOCKET", "KV_TCP", "KV_PORT", "KVHOST_TCP", "KVHOST_PORT"} {
		t.Setenv(k, "")
	}
	return dir
}

// fakeHost serves capabilities.list (primal who, methods) and who.am_i on a
// listener until the test ends.
func fakeHost(t *testing.T, l net.Listener, who string, methods ...string) {
	t.Helper()
	m := jsonrpc.Map{
		"capabilities.list": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
			return map[string]any{"primal": who, "version": "1.0.0", "methods": methods}, nil
		}),
		"who.am_i": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) { return who, nil }),
	}
	serveMap(t, l, m)
}

func serveMap(t *testing.T, l net.Listener, m jsonrpc.Map) {
	t.Helper()
	srv := jsonrpc.NewServer(m, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = srv.Serve(ctx, l) }()
	t.Cleanup(func() { cancel(); l.Close(); wg.Wait() })
}

func unixListen(t *testing.T, path string) net.Listener {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// discoverWho runs Discover and asks the host found who it is.
func discoverWho(t *testing.T, q Query) (string, Found) {
	t.Helper()
	ctx := context.Background()
	c, f, err := Discover(ctx, q)
	if err != nil {
		t.Fatalf("Discover(%+v): %v", q, err)
	}
	defer c.Close()
	var who string
	if err := c.Call(ctx, "who.am_i", nil, &who); err != nil {
		t.Fatal(err)
	}
	return who, f
}

// TestDiscoverEnvironmentFirst: $KV_SOCKET (outside the socket directory)
// wins over a domain symlink; $KVHOST_SOCKET, naming the primal, over both.
func TestDiscoverEnvironmentFirst(t *testing.T) {
	dir := discoverEnv(t)
	other := t.TempDir()
	fakeHost(t, unixListen(t, filepath.Join(other, "a.sock")), "from-env", "kv.seal")
	fakeHost(t, unixListen(t, filepath.Join(other, "b.sock")), "from-primal-env", "kv.seal")
	fakeHost(t, unixListen(t, filepath.Join(dir, "kv.sock")), "from-symlink", "kv.seal")
	t.Setenv("KV_SOCKET", filepath.Join(other, "a.sock"))
	if who, f := discoverWho(t, Query{Method: "kv.seal"}); who != "from-env" || f.Via != "env KV_SOCKET" {
		t.Fatalf("found %s via %s", who, f.Via)
	}
	t.Setenv("KVHOST_SOCKET", "unix://"+filepath.Join(other, "b.sock"))
	if who, f := discoverWho(t, Query{Method: "kv.seal", Primal: "kvhost"}); who != "from-primal-env" || f.Via != "env KVHOST_SOCKET" {
		t.Fatalf("found %s via %s", who, f.Via)
	}
	// A dead $KV_SOCKET falls through to the next step.
	t.Setenv("KVHOST_SOCKET", "")
	t.Setenv("KV_SOCKET", filepath.Join(other, "gone.sock"))
	if who, f := discoverWho(t, Query{Method: "kv.seal"}); who != "from-symlink" || f.Via != "domain symlink kv.sock" {
		t.Fatalf("found %s via %s", who, f.Via)
	}
}

// TestDiscoverPrimalSocketFamilies: two families and a standalone primal
// on one machine; each process finds only its own scope's socket.
func TestDiscoverPrimalSocketFamilies(t *testing.T) {
	dir := discoverEnv(t)
	for _, n := range []string{"kvhost", "kvhost-fam1", "kvhost-fam2"} {
		fakeHost(t, unixListen(t, filepath.Join(dir, n+".sock")), n, "kv.get")
	}
	for fam, want := range map[string]string{"": "kvhost", "fam1": "kvhost-fam1", "fam2": "kvhost-fam2"} {
		t.Setenv("FAMILY_ID", fam)
		if who, f := discoverWho(t, Query{Primal: "kvhost"}); who != want || f.Via != "socket "+want+".sock" {
			t.Fatalf("FAMILY_ID=%q: found %s via %s", fam, who, f.Via)
		}
		if who, _ := discoverWho(t, Query{Method: "kv.get"}); who != want {
			t.Fatalf("FAMILY_ID=%q: kv.get found %s (directory scan crossed families)", fam, who)
		}
	}
	// fam3 has no kvhost: nothing of another scope is used.
	t.Setenv("FAMILY_ID", "fam3")
	if c, f, err := Discover(context.Background(), Query{Primal: "kvhost", Method: "kv.get"}); err == nil {
		c.Close()
		t.Fatalf("fam3 found %+v", f)
	}
}

// TestDiscoverDomainSymlink: with no node, a domain symlink kv.sock →
// kvhost.sock reaches kvhost.
func TestDiscoverDomainSymlink(t *testing.T) {
	dir := discoverEnv(t)
	fakeHost(t, unixListen(t, filepath.Join(dir, "kvhost.sock")), "kvhost", "kv.seal")
	if err := os.Symlink("kvhost.sock", filepath.Join(dir, "kv.sock")); err != nil {
		t.Fatal(err)
	}
	if who, f := discoverWho(t, Query{Method: "kv.seal"}); who != "kvhost" || f.Via != "domain symlink kv.sock" {
		t.Fatalf("found %s via %s", who, f.Via)
	}
}

// TestDiscoverSocketDirectory: with no name, symlink or node, the socket
// whose capabilities.list names the method is found; others are skipped.
func TestDiscoverSocketDirectory(t *testing.T) {
	dir := discoverEnv(t)
	fakeHost(t, unixListen(t, filepath.Join(dir, "aaa.sock")), "aaa", "blob.put")
	fakeHost(t, unixListen(t, filepath.Join(dir, "store.sock")), "store", "kv.get", "kv.seal")
	if who, f := discoverWho(t, Query{Method: "kv.seal"}); who != "store" || f.Via != "socket directory (store.sock)" {
		t.Fatalf("found %s via %s", who, f.Via)
	}
}

// TestDiscoverRegistry: no socket provides the method by name; the
// registry does — capmesh's ipc.resolve, and Songbird's shapes (no
// ipc.resolve by capability, ipc.find_capability answering "services" with
// a tagged endpoint object).
func TestDiscoverRegistry(t *testing.T) {
	dir := discoverEnv(t)
	other := t.TempDir()
	prov := filepath.Join(other, "p.sock")
	fakeHost(t, unixListen(t, prov), "provider", "kv.seal")
	serveMap(t, unixListen(t, filepath.Join(dir, "songbird.sock")), jsonrpc.Map{
		"ipc.find_capability": jsonrpc.HandlerFunc(func(_ context.Context, r *jsonrpc.Request) (any, error) {
			var p struct{ Capability string }
			_ = json.Unmarshal(r.Params, &p)
			if p.Capability != "kv" {
				return map[string]any{"services": []any{}}, nil
			}
			return map[string]any{"services": []any{map[string]any{"primal_id": "provider", "endpoint": map[string]any{"type": "UnixSocket", "path": prov}}}}, nil
		}),
	})
	if who, f := discoverWho(t, Query{Method: "kv.seal"}); who != "provider" || !strings.HasPrefix(f.Via, "registry songbird.sock") {
		t.Fatalf("found %s via %s", who, f.Via)
	}
	// A capmesh node comes first; with Route it is the endpoint itself.
	l := unixListen(t, filepath.Join(dir, "capmesh.sock"))
	fakeHost(t, l, "node")
	c, f, err := Discover(context.Background(), Query{Method: "kv.seal", Route: true})
	if err != nil || f.Via != "registry capmesh.sock" {
		t.Fatalf("Route: %+v %v", f, err)
	}
	c.Close()
}

// TestDiscoverTCPFallback: the Unix steps find nothing (the socket named
// by $KV_SOCKET is gone), $KV_TCP then $KV_PORT reach a TCP listener.
func TestDiscoverTCPFallback(t *testing.T) {
	discoverEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fakeHost(t, l, "tcp-host", "kv.seal")
	t.Setenv("KV_SOCKET", filepath.Join(t.TempDir(), "gone.sock"))
	t.Setenv("KV_TCP", l.Addr().String())
	if who, f := discoverWho(t, Query{Method: "kv.seal"}); who != "tcp-host" || f.Via != "tcp fallback KV_TCP" {
		t.Fatalf("found %s via %s", who, f.Via)
	}
	t.Setenv("KV_TCP", "")
	_, port, _ := net.SplitHostPort(l.Addr().String())
	t.Setenv("KV_PORT", port)
	if who, f := discoverWho(t, Query{Method: "kv.seal"}); who != "tcp-host" || f.Via != "tcp fallback KV_PORT" {
		t.Fatalf("found %s via %s", who, f.Via)
	}
}

// TestDiscoverNotFound: the error names every step that was tried.
func TestDiscoverNotFound(t *testing.T) {
	discoverEnv(t)
	t.Setenv("KV_SOCKET", "/nonexistent/kv.sock")
	_, _, err := Discover(context.Background(), Query{Method: "kv.seal"})
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"env KV_SOCKET", "domain symlink kv.sock", "socket directory", "registry capmesh.sock", "registry songbird.sock"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}
}

func TestEndpointOf(t *testing.T) {
	cases := map[string]string{
		`{"endpoint":{"transport":"uds","path":"/run/x.sock"}}`:            "unix:///run/x.sock",
		`{"endpoint":{"transport":"tcp","host":"10.0.0.1","port":7700}}`:   "tcp://10.0.0.1:7700",
		`{"endpoint":{"transport":"mesh_relay","peer_id":"g"}}`:            "",
		`{"endpoint":"/run/x.sock"}`:                                       "/run/x.sock",
		`{"endpoint":"unix:///run/x.sock"}`:                                "unix:///run/x.sock",
		`{"endpoint":{"type":"unix","path":"/run/x.sock"}}`:                "unix:///run/x.sock",
		`{"endpoint":{"UnixSocket":{"path":"/run/x.sock"}}}`:               "unix:///run/x.sock",
		`{"endpoint":{"unix":"/run/x.sock"}}`:                              "unix:///run/x.sock",
		`{"endpoint":{"type":"tcp","host":"127.0.0.1","port":9000}}`:       "tcp://127.0.0.1:9000",
		`{"endpoint":{"Tcp":{"host":"::1","port":9}}}`:                     "tcp://[::1]:9",
		`{"endpoint":"/primal/beardog","socket_path":"/run/b.sock"}`:       "/run/b.sock",
		`{"virtual_endpoint":"/primal/x","native_endpoint":"/run/n.sock"}`: "/run/n.sock",
		`{"endpoint":{"type":"carrier-pigeon"}}`:                           "",
		`[]`:                                                               "",
	}
	for in, want := range cases {
		if got := EndpointOf(json.RawMessage(in)); got != want {
			t.Errorf("EndpointOf(%s) = %q, want %q", in, got, want)
		}
	}
}
