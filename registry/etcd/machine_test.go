package etcd_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/api"
	"github.com/capmesh/capmesh/registry/etcd"
)

// joinOn starts a registry node on srv under prefix, on machine, with
// its router served on a Unix socket; it returns the node and a client
// of its router.
func joinOn(t *testing.T, srv *etcdtest.Server, prefix, machine string) (*registry.Node, *jsonrpc.Client) {
	t.Helper()
	st, err := etcd.Open(context.Background(), etcd.Options{Endpoints: srv.Endpoints(), Prefix: prefix, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	n, err := registry.NewNode(registry.Config{Store: st, Logger: quiet, Machine: machine})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(); _ = st.Close() })
	l := listen(t, "unix", "")
	srvr := jsonrpc.NewServer(api.RPC(n), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srvr.Serve(ctx, l) }()
	t.Cleanup(func() { cancel(); <-done })
	c, err := jsonrpc.Dial(context.Background(), "unix", l.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return n, c
}

// listen listens on a Unix socket in a directory of its own (addr
// ignored) or on TCP at addr.
func listen(t *testing.T, network, addr string) net.Listener {
	t.Helper()
	if network == "unix" {
		dir, err := os.MkdirTemp("", "cm-mach-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		addr = filepath.Join(dir, "s.sock")
	}
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// countingHost serves identity.get as name, and crypto.sign, kv.get,
// named.get and remote.get with "ok", on l, and counts the connections it accepts.
func countingHost(t *testing.T, name string, l net.Listener) *atomic.Int64 {
	t.Helper()
	var conns atomic.Int64
	ok := jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) { return "ok", nil })
	srv := jsonrpc.NewServer(jsonrpc.Map{
		"identity.get": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
			return map[string]string{"primal": name}, nil
		}),
		"crypto.sign": ok,
		"kv.get":      ok,
		"named.get":   ok,
		"remote.get":  ok,
	}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ctx, countListener{l, &conns})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return &conns
}

type countListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// TestLocalEndpointDialledOnlyOnItsMachine: registrations naming
// endpoints only their own machine reaches — a local registration on a
// Unix socket and a signed descriptor at 127.0.0.1 — made through node a
// on machine 1 are listed by node b on machine 2, but b's router refuses
// to call them (−32003 endpoint_is_local) without connecting to them,
// while a and c (another node of machine 1) route them; so do nodes of
// either machine started afterwards (from etcd's snapshot). ipc.resolve,
// whose caller connects to what it gets, follows the same rule. Before, b would
// have dialled its own machine's socket and loopback port: anyone who may
// register on machine 1 could point b's router at machine 2's services.
func TestLocalEndpointDialledOnlyOnItsMachine(t *testing.T) {
	srv := etcdtest.Start(t)
	a, ca := joinOn(t, srv, "/machines/", "machine-1")
	b, cb := joinOn(t, srv, "/machines/", "machine-2")
	c, cc := joinOn(t, srv, "/machines/", "machine-1")
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()

	sockL := listen(t, "unix", "")
	sockConns := countingHost(t, "beardog", sockL)
	if _, _, err := a.RegisterLocal(ctx, localPeer(), registry.LocalRegistration{Name: "beardog", Capabilities: []string{"crypto.sign"}, Endpoint: sockL.Addr().String()}); err != nil {
		t.Fatal(err)
	}
	tcpL := listen(t, "tcp", "127.0.0.1:0")
	tcpConns := countingHost(t, "kv", tcpL)
	priv, key := nodeKey(t)
	if _, err := a.Enroll(ctx, key, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Register(ctx, signedAt(t, priv, []string{"kv.get"}, time.Now(), tcpL.Addr().(*net.TCPAddr).Port)); err != nil {
		t.Fatal(err)
	}
	// b and c learn both through their own watches, each in its time.
	waitFor(t, func() bool {
		for _, n := range []*registry.Node{b, c} {
			if len(n.Find("crypto.sign", registry.FindOptions{})) != 1 || len(n.Find("kv.get", registry.FindOptions{})) != 1 {
				return false
			}
		}
		return true
	})

	// Nodes started afterwards learn the machines from etcd's snapshot.
	_, cb2 := joinOn(t, srv, "/machines/", "machine-2")
	_, cc2 := joinOn(t, srv, "/machines/", "machine-1")

	for _, method := range []string{"crypto.sign", "kv.get"} {
		for name, c := range map[string]*jsonrpc.Client{"b": cb, "b2": cb2} {
			before := sockConns.Load() + tcpConns.Load()
			err := c.Call(ctx, method, map[string]any{}, nil)
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != registry.CodeForbidden || !hasWord(je, registry.CodeWordLocalEndpoint) {
				t.Errorf("%s through %s on machine 2: %v, want %d %s", method, name, err, registry.CodeForbidden, registry.CodeWordLocalEndpoint)
			}
			if after := sockConns.Load() + tcpConns.Load(); after != before {
				t.Errorf("%s through %s on machine 2: the provider saw %d connections", method, name, after-before)
			}
		}
		// ipc.resolve answers where to connect: not there, on machine 2.
		resolves := []map[string]any{{"capability": method}}
		if method == "kv.get" {
			resolves = append(resolves, map[string]any{"primal_id": "agent-1"}) // the descriptor's agent_id
		}
		for _, params := range resolves {
			err := cb.Call(ctx, "ipc.resolve", params, nil)
			var je *jsonrpc.Error
			if !errors.As(err, &je) || !hasWord(je, registry.CodeWordLocalEndpoint) {
				t.Errorf("ipc.resolve %v on machine 2: %v, want %s", params, err, registry.CodeWordLocalEndpoint)
			}
			var res map[string]any
			if err := ca.Call(ctx, "ipc.resolve", params, &res); err != nil || res["endpoint"] == nil {
				t.Errorf("ipc.resolve %v on machine 1: %v, %v", params, res, err)
			}
		}
		for name, c := range map[string]*jsonrpc.Client{"a": ca, "c": cc, "c2": cc2} {
			var res string
			if err := c.Call(ctx, method, map[string]any{}, &res); err != nil || res != "ok" {
				t.Errorf("%s through %s on machine 1: %q, %v", method, name, res, err)
			}
		}
	}
}

// hasWord reports whether je's data carries the registry's word.
func hasWord(je *jsonrpc.Error, word string) bool {
	var d struct {
		Code string `json:"code"`
	}
	return json.Unmarshal(je.Data, &d) == nil && d.Code == word
}

// TestUnstampedLocalEndpointOnSharedStore: a record naming a local-only
// endpoint without a machine — written by a node that predates machine
// stamps — is listed but not routed, even by a node of the machine it
// may well have come from: nothing says where it was admitted.
func TestUnstampedLocalEndpointOnSharedStore(t *testing.T) {
	srv := etcdtest.Start(t)
	a, ca := joinOn(t, srv, "/unstamped/", "machine-1")
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	tcpL := listen(t, "tcp", "127.0.0.1:0")
	conns := countingHost(t, "kv", tcpL)
	priv, key := nodeKey(t)
	if _, err := a.Enroll(ctx, key, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	raw, err := signedAt(t, priv, []string{"kv.get"}, time.Now(), tcpL.Addr().(*net.TCPAddr).Port).VerifyAndMarshal()
	if err != nil {
		t.Fatal(err)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: deadline})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The framing of an older node: 8 bytes of expiry (none), the value.
	if _, err := c.Put(ctx, "/unstamped/descriptor/"+key, string(make([]byte, 8))+string(raw)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(a.Find("kv.get", registry.FindOptions{})) == 1 })
	err = ca.Call(ctx, "kv.get", map[string]any{}, nil)
	var je *jsonrpc.Error
	if !errors.As(err, &je) || !hasWord(je, registry.CodeWordLocalEndpoint) {
		t.Errorf("routing an unstamped loopback record: %v, want %s", err, registry.CodeWordLocalEndpoint)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the provider saw %d connections", n)
	}
}
