package registry_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry/api"

	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/descriptor"
)

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// assigners asks each in turn.
type assigners []jsonrpc.Assigner

func (as assigners) Assign(ctx context.Context, m string) jsonrpc.Handler {
	for _, a := range as {
		if h := a.Assign(ctx, m); h != nil {
			return h
		}
	}
	return nil
}

// loopNode is a node served on a Unix socket (with identity.get, as the
// capmesh server answers it) and on counted TCP.
type loopNode struct {
	n    *registry.Node
	sock string
	tcp  *countingListener
}

func newLoopNode(t *testing.T, trusted ...ed25519.PrivateKey) *loopNode {
	t.Helper()
	var pins []string
	for _, k := range trusted {
		pins = append(pins, base64.StdEncoding.EncodeToString(k.Public().(ed25519.PublicKey)))
	}
	n := newNode(t, registry.Config{TrustedKeys: pins})
	a := assigners{jsonrpc.Map{"identity.get": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return map[string]string{"primal": "capmesh"}, nil
	})}, api.RPC(n)}
	ul, sock := unixListener(t, "capmesh")
	serve(t, a, ul)
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: tl}
	serve(t, a, cl)
	return &loopNode{n: n, sock: sock, tcp: cl}
}

func (ln *loopNode) port() int { return ln.tcp.Addr().(*net.TCPAddr).Port }

func (ln *loopNode) declareSelf(t *testing.T) {
	t.Helper()
	if err := ln.n.AddSelfEndpoints("unix://"+ln.sock, "tcp://"+ln.tcp.Addr().String()); err != nil {
		t.Fatal(err)
	}
}

func loopDescriptor(t *testing.T, k ed25519.PrivateKey, host string, port int) *descriptor.Descriptor {
	t.Helper()
	d := descriptor.New("looper", "capmesh", k.Public().(ed25519.PublicKey), []string{"loop"}, descriptor.Endpoint{Host: host, Port: port, Scheme: "tcp"}, time.Now(), 10*time.Minute)
	if err := d.Sign(k); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestRoutingSelfLoopRefused: the node refuses a registration that names
// its own socket (directly or through a symlink) or its own TCP port, and
// the router never dials itself for an entry registered before it knew
// its endpoints. Before, one call became 1,024 nested connections.
func TestRoutingSelfLoopRefused(t *testing.T) {
	_, k, _ := ed25519.GenerateKey(nil)
	ln := newLoopNode(t, k)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Registered before the node declares its endpoints (as a stored entry
	// loaded at start would be): the router must still not dial itself.
	if _, err := ln.n.Register(ctx, loopDescriptor(t, k, "127.0.0.1", ln.port())); err != nil {
		t.Fatal(err)
	}
	ln.declareSelf(t)
	c := dialUnix(t, ln.sock)
	code, _ := rpcCode(c.Call(ctx, "loop.ping", map[string]any{}, nil))
	if code != registry.CodeUnavailable {
		t.Errorf("routing to itself: code %v, want %v (provider unreachable)", code, registry.CodeUnavailable)
	}
	if got := ln.tcp.n.Load(); got != 0 {
		t.Errorf("the node dialled itself %d times", got)
	}

	// Registrations naming the node are refused.
	link := filepath.Join(filepath.Dir(ln.sock), "mesh.sock")
	if err := os.Symlink(ln.sock, link); err != nil {
		t.Fatal(err)
	}
	for _, ep := range []string{ln.sock, "unix://" + ln.sock, link, "tcp://127.0.0.1:" + strconv.Itoa(ln.port()), "localhost:" + strconv.Itoa(ln.port())} {
		code, word := rpcCode(c.Call(ctx, "ipc.register", map[string]any{"name": "capmesh", "capabilities": []string{"loop"}, "endpoint": ep}, nil))
		if code != jsonrpc.InvalidParams || word != registry.CodeWordSelfRoute {
			t.Errorf("unsigned registration at %s: %v %q, want -32602 %q", ep, code, word, registry.CodeWordSelfRoute)
		}
	}
	for _, host := range []string{"127.0.0.1", "0.0.0.0", "::1", "localhost"} {
		d := loopDescriptor(t, k, host, ln.port())
		d.RegisteredAt = descriptor.TimeOf(time.Now().Add(time.Duration(len(host)) * time.Millisecond))
		if err := d.Sign(k); err != nil {
			t.Fatal(err)
		}
		raw, _ := d.MarshalJSON()
		code, word := rpcCode(c.Call(ctx, "ipc.register", map[string]any{"descriptor": jsonRaw(raw)}, nil))
		if code != jsonrpc.InvalidParams || word != registry.CodeWordSelfRoute {
			t.Errorf("signed registration at tcp://%s:%d: %v %q, want -32602 %q", host, ln.port(), code, word, registry.CodeWordSelfRoute)
		}
	}
	if got := ln.tcp.n.Load(); got != 0 {
		t.Errorf("the node dialled itself %d times", got)
	}
}

type jsonRaw []byte

func (r jsonRaw) MarshalJSON() ([]byte, error) { return r, nil }

// TestRoutingTwoNodeCycle: two nodes that list each other as the provider
// of "loop" bounce a call MaxHops times, then refuse it with CodeHopLimit;
// both routing entry points (fallback and capability.call) stop.
func TestRoutingTwoNodeCycle(t *testing.T) {
	_, k, _ := ed25519.GenerateKey(nil)
	a, b := newLoopNode(t, k), newLoopNode(t, k)
	a.declareSelf(t)
	b.declareSelf(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.n.Register(ctx, loopDescriptor(t, k, "127.0.0.1", b.port())); err != nil {
		t.Fatal(err)
	}
	if _, err := b.n.Register(ctx, loopDescriptor(t, k, "127.0.0.1", a.port())); err != nil {
		t.Fatal(err)
	}
	c := dialUnix(t, a.sock)
	for i, call := range []func() error{
		func() error { return c.Call(ctx, "loop.ping", map[string]any{"x": 1}, nil) },
		func() error { return c.Call(ctx, "loop.ping", nil, nil) },
		func() error {
			return c.Call(ctx, "capability.call", map[string]any{"capability": "loop", "operation": "ping", "args": map[string]any{}}, nil)
		},
	} {
		before := a.tcp.n.Load() + b.tcp.n.Load()
		code, word := rpcCode(call())
		if code != registry.CodeHopLimit || word != registry.CodeWordHopLimit {
			t.Errorf("call %d: %v %q, want %v %q", i, code, word, registry.CodeHopLimit, registry.CodeWordHopLimit)
		}
		if got := a.tcp.n.Load() + b.tcp.n.Load() - before; got != registry.DefaultMaxHops {
			t.Errorf("call %d: %d forwarded connections, want %d (one per hop)", i, got, registry.DefaultMaxHops)
		}
	}

	// The count is the caller's too: a request at the limit is not
	// forwarded at all, a malformed count or array params are refused.
	before := a.tcp.n.Load() + b.tcp.n.Load()
	if code, _ := rpcCode(c.Call(ctx, "loop.ping", map[string]any{"_meta": map[string]any{"hops": registry.DefaultMaxHops}}, nil)); code != registry.CodeHopLimit {
		t.Errorf("hops at the limit: %v", code)
	}
	for _, p := range []any{map[string]any{"_meta": map[string]any{"hops": -1}}, map[string]any{"_meta": map[string]any{"hops": 1.5}}, map[string]any{"_meta": "x"}, []any{1, 2}} {
		if code, _ := rpcCode(c.Call(ctx, "loop.ping", p, nil)); code != jsonrpc.InvalidParams {
			t.Errorf("params %v: %v, want -32602", p, code)
		}
	}
	if got := a.tcp.n.Load() + b.tcp.n.Load() - before; got != 0 {
		t.Errorf("refused requests were forwarded: %d connections", got)
	}
}

// TestForeignDescriptorCannotNameLocalEndpoint: a signed descriptor that
// arrives from another machine may not name an endpoint only the machine
// dialling it can reach (loopback, unspecified, localhost), over the Go
// API with a remote peer in the context and over POST /agents from a
// remote address; the same descriptor from this machine, and a routable
// endpoint from anywhere, are accepted. Before, an enrolled remote node
// could point the router at a service on the node's loopback.
func TestForeignDescriptorCannotNameLocalEndpoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	remote := jsonrpc.ContextWithPeer(ctx, jsonrpc.Peer{Transport: "tcp", Addr: "192.0.2.7:40000"})
	local := jsonrpc.ContextWithPeer(ctx, jsonrpc.Peer{Transport: "tcp", Addr: "127.0.0.1:40000"})
	for _, host := range []string{"127.0.0.1", "127.9.9.9", "::1", "0.0.0.0", "::", "localhost", "db.localhost"} {
		_, k, _ := ed25519.GenerateKey(nil)
		n := newLoopNode(t, k).n
		_, err := n.Register(remote, loopDescriptor(t, k, host, 5432))
		if word := registry.AsError(err).Code; err == nil || word != registry.CodeWordLocalEndpoint {
			t.Errorf("remote registration at %s: %v, want %s", host, err, registry.CodeWordLocalEndpoint)
		}
		if _, err := n.Register(local, loopDescriptor(t, k, host, 5432)); err != nil {
			t.Errorf("registration at %s from this machine: %v", host, err)
		}
	}
	_, k, _ := ed25519.GenerateKey(nil)
	n := newLoopNode(t, k).n
	if _, err := n.Register(remote, loopDescriptor(t, k, "198.51.100.4", 7000)); err != nil {
		t.Errorf("remote registration at a routable address: %v", err)
	}

	// POST /agents: the binding passes the request's address on.
	h := api.HTTPHandler(n)
	for _, tc := range []struct {
		remoteAddr string
		want       int
	}{{"192.0.2.1:1234", http.StatusForbidden}, {"[::1]:1234", http.StatusOK}} {
		d := loopDescriptor(t, k, "127.0.0.1", 6379)
		d.RegisteredAt = descriptor.TimeOf(time.Now().Add(time.Duration(tc.want) * time.Microsecond))
		if err := d.Sign(k); err != nil {
			t.Fatal(err)
		}
		raw, _ := d.MarshalJSON()
		req := httptest.NewRequest("POST", "/agents", bytes.NewReader(raw))
		req.RemoteAddr = tc.remoteAddr
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("POST /agents from %s: %d %s, want %d", tc.remoteAddr, rec.Code, rec.Body, tc.want)
		}
	}
}
