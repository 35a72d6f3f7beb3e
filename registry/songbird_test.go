package registry_test

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry/api"

	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
)

// TestSongbirdRegisterShapes: the endpoint forms ecoPrimals registrants
// send are accepted — Songbird's tagged object, the socket_path alias, and
// the IPC standard's own example, whose "/primal/beardog" virtual endpoint
// stands for beardog's socket in the biomeos directory.
func TestSongbirdRegisterShapes(t *testing.T) {
	n := newNode(t, registry.Config{LocalTTL: time.Hour})
	l, nodeSock := unixListener(t, "node")
	serve(t, api.RPC(n), l)
	c := dialUnix(t, nodeSock)
	host := fakeHost(t, "beardog")
	for _, params := range []map[string]any{
		{"primal_id": "beardog", "capabilities": []string{"crypto"}, "endpoint": map[string]any{"transport": "uds", "path": host}},
		{"primal_id": "beardog", "capabilities": []string{"crypto"}, "socket_path": host},
		{"name": "beardog", "capabilities": []string{"crypto"}, "endpoint": "/primal/beardog", "socket_path": host},
	} {
		res := call(t, c, "ipc.register", params)
		if res["endpoint"] != "unix://"+host {
			t.Fatalf("register %v: endpoint %v", params, res["endpoint"])
		}
		call(t, c, "ipc.unregister", map[string]any{"name": "beardog", "registration_token": res["registration_token"]})
	}

	// The seed's example verbatim: the socket is inferred.
	t.Setenv("BIOMEOS_SOCKET_DIR", filepath.Dir(host))
	t.Setenv("FAMILY_ID", "")
	seed := map[string]any{"name": "beardog", "endpoint": "/primal/beardog", "capabilities": []string{"crypto", "btsp", "ed25519", "x25519"}, "version": "2.7.0"}
	if res := call(t, c, "ipc.register", seed); res["endpoint"] != "unix://"+host {
		t.Fatalf("seed example registered %v", res["endpoint"])
	}

	// A virtual endpoint naming another primal is refused with what to send.
	err := c.Call(context.Background(), "ipc.register", map[string]any{"name": "beardog", "endpoint": "/primal/songbird"}, nil)
	if code, word := rpcCode(err); code != jsonrpc.InvalidParams || word != "invalid_params" || !strings.Contains(err.Error(), `send the socket the primal listens on, as "endpoint": "/run/user/<uid>/biomeos/beardog.sock"`) {
		t.Fatalf("virtual endpoint of another primal: %v", err)
	}
}

// TestSongbirdResultShapes: ipc.resolve and its Songbird alias
// capability.resolve answer Songbird's ResolveResult (endpoint a tagged
// transport object, native_endpoint a URI, socket the bare path);
// ipc.find_capability lists providers as both "providers" and "services";
// Songbird's aliases of ipc.discover answer.
func TestSongbirdResultShapes(t *testing.T) {
	n := newNode(t, registry.Config{LocalTTL: time.Hour})
	l, nodeSock := unixListener(t, "node")
	serve(t, api.RPC(n), l)
	c := dialUnix(t, nodeSock)
	host := fakeHost(t, "beardog")
	call(t, c, "ipc.register", map[string]any{"primal_id": "beardog", "capabilities": []string{"crypto"}, "endpoint": host})
	for _, q := range []struct {
		method string
		params map[string]any
	}{
		{"ipc.resolve", map[string]any{"primal_id": "beardog"}},
		{"capability.resolve", map[string]any{"capability": "crypto"}},
	} {
		res := call(t, c, q.method, q.params)
		ep, _ := res["endpoint"].(map[string]any)
		if ep["transport"] != "uds" || ep["path"] != host || res["native_endpoint"] != "unix://"+host || res["socket"] != host || res["virtual_endpoint"] != "/primal/beardog" {
			t.Fatalf("%s: %v", q.method, res)
		}
	}
	res := call(t, c, "ipc.find_capability", map[string]any{"capability": "crypto"})
	provs, _ := res["providers"].([]any)
	svcs, _ := res["services"].([]any)
	if len(provs) != 1 || !reflect.DeepEqual(provs, svcs) || res["revision"] == nil || res["capability"] != "crypto" {
		t.Fatalf("find_capability: %v", res)
	}
	for _, m := range []string{"discovery.find_by_capability", "net.discovery.find_by_capability", "discovery.by_capability"} {
		if got, _ := call(t, c, m, map[string]any{"capability": "crypto"})["providers"].([]any); len(got) != 1 {
			t.Fatalf("%s found %v", m, got)
		}
	}
}

// TestEcoPrimalsClientScript: an ecoPrimals-style client script
// (testdata/ecoprimals_client.py) sends the IPC standard's own messages
// verbatim and registers, discovers and resolves against the node.
func TestEcoPrimalsClientScript(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	host := fakeHost(t, "beardog")
	t.Setenv("BIOMEOS_SOCKET_DIR", filepath.Dir(host))
	t.Setenv("FAMILY_ID", "")
	n := newNode(t, registry.Config{LocalTTL: time.Hour})
	l, nodeSock := unixListener(t, "capmesh")
	serve(t, api.RPC(n), l)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "testdata/ecoprimals_client.py", nodeSock, host).CombinedOutput()
	if err != nil {
		t.Fatalf("client script: %v\n%s", err, out)
	}
	for _, want := range []string{"registered /primal/beardog", "discovered beardog in providers and services", "resolved " + host} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestLocalNamesIgnoreCase: "BearDog" is the registration of "beardog",
// not a second one beside it: registering it replaces the first (here the
// registrant is the same process, so it may), and heartbeats and
// resolution find it under either case.
func TestLocalNamesIgnoreCase(t *testing.T) {
	n := newNode(t, registry.Config{LocalTTL: time.Hour})
	l, nodeSock := unixListener(t, "node")
	serve(t, api.RPC(n), l)
	c := dialUnix(t, nodeSock)
	first := fakeHost(t, "beardog")
	second := fakeHost(t, "beardog")
	call(t, c, "ipc.register", map[string]any{"primal_id": "beardog", "capabilities": []string{"crypto"}, "endpoint": first})
	call(t, c, "ipc.register", map[string]any{"primal_id": "BearDog", "capabilities": []string{"crypto"}, "endpoint": second})
	if got := n.List(false); len(got) != 1 || got[0].Endpoint != "unix://"+second {
		t.Fatalf("want one registration, of the second endpoint: %v", got)
	}
	call(t, c, "ipc.heartbeat", map[string]any{"name": "BEARDOG"})
	if res := call(t, c, "ipc.resolve", map[string]any{"name": "beardog"}); res["socket"] != second {
		t.Fatalf("resolve beardog: %v", res)
	}
}

// TestIdentityInferredFromSocketName: a primal without identity.get
// (-32601) is registered when its socket's name is its name, as biomeOS
// infers it; under another name it is still refused.
func TestIdentityInferredFromSocketName(t *testing.T) {
	n := newNode(t, registry.Config{LocalTTL: time.Hour})
	l, nodeSock := unixListener(t, "node")
	serve(t, api.RPC(n), l)
	c := dialUnix(t, nodeSock)
	hl, sock := unixListener(t, "squirrel")
	serve(t, jsonrpc.Map{}, hl) // answers every method -32601
	t.Setenv("FAMILY_ID", "")
	call(t, c, "ipc.register", map[string]any{"name": "squirrel", "capabilities": []string{"ai"}, "endpoint": sock})
	err := c.Call(context.Background(), "ipc.register", map[string]any{"name": "beardog", "capabilities": []string{"ai"}, "endpoint": sock}, nil)
	if _, word := rpcCode(err); word != "identity_probe_failed" {
		t.Fatalf("registering squirrel.sock as beardog: %v", err)
	}
}

// TestWatchFromZeroAfterRestart: a node restarted on its store keeps its
// revision but not its events; a watcher from revision 0 gets the current
// state as "registered" snapshot events instead of -32010, while a cursor
// inside the lost history is still told to re-list.
func TestWatchFromZeroAfterRestart(t *testing.T) {
	store := registry.NewMemStore()
	n1 := newNode(t, registry.Config{LocalTTL: time.Hour, Store: store})
	l, nodeSock := unixListener(t, "node")
	serve(t, api.RPC(n1), l)
	host := fakeHost(t, "beardog")
	other := fakeHost(t, "squirrel")
	c := dialUnix(t, nodeSock)
	call(t, c, "ipc.register", map[string]any{"primal_id": "beardog", "capabilities": []string{"crypto"}, "endpoint": host})
	call(t, c, "ipc.register", map[string]any{"primal_id": "squirrel", "capabilities": []string{"ai"}, "endpoint": other})
	n1.Close()

	n2 := newNode(t, registry.Config{LocalTTL: time.Hour, Store: store})
	rev, evs, err := n2.Watch(context.Background(), 0, []string{"crypto"}, 0)
	if err != nil || rev != n2.Version() || len(evs) != 1 || evs[0].Name != "beardog" || evs[0].Kind != registry.EventRegistered || evs[0].Reason != "snapshot" {
		t.Fatalf("watch from 0 after restart: rev %d, %+v, %v", rev, evs, err)
	}
	if _, _, err := n2.Watch(context.Background(), 1, nil, 0); err == nil || !strings.Contains(err.Error(), "re-list") {
		t.Fatalf("watch from 1 after restart: %v", err)
	}
}

// TestUnsignedRemoteRefusalSaysWhatToSend: capmesh stays stricter than
// Songbird (no unsigned registration over TCP), and the refusal names the
// signed descriptor's fields to send instead.
func TestUnsignedRemoteRefusalSaysWhatToSend(t *testing.T) {
	n := newNode(t, registry.Config{LocalTTL: time.Hour})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(t, api.RPC(n), l)
	c, err := jsonrpc.Dial(context.Background(), "tcp", l.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seed := map[string]any{"name": "beardog", "endpoint": "/primal/beardog", "capabilities": []string{"crypto"}, "version": "2.7.0"}
	err = c.Call(context.Background(), "ipc.register", seed, nil)
	if _, word := rpcCode(err); word != "signature_required_for_remote_peer" {
		t.Fatalf("unsigned over TCP: %v", err)
	}
	for _, want := range []string{`"descriptor"`, `"node_public_key"`, `"endpoint": {"host", "port", "scheme": "tcp"}`, `"signatures": [{"key_id", "sig"}]`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal does not name %s: %v", want, err)
		}
	}
}
