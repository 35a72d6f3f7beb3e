package api_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/jsonrpc/jhttp"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/descriptor"
)

// loopbackName returns a name of this machine that resolves to loopback
// without saying so in its text, or skips the test.
func loopbackName(t *testing.T) string {
	t.Helper()
	names := []string{"vm", "runsc"}
	if h, err := os.Hostname(); err == nil {
		names = append([]string{h}, names...)
	}
	for _, n := range names {
		if addrs, err := net.LookupHost(n); err == nil && len(addrs) > 0 && net.ParseIP(addrs[0]).IsLoopback() {
			return n
		}
	}
	t.Skip("no host name resolving to loopback here")
	return ""
}

// TestSingleNodeNameToLoopback: on one node with its own store, a host of
// the node's user registered locally at a name that resolves to loopback
// is routed as before (local development keeps working), while a signed
// descriptor posted from another machine naming the same kind of name is
// refused at connect time: 403 endpoint_is_local, no connection.
func TestSingleNodeNameToLoopback(t *testing.T) { singleNodeNameToLoopback(t, "tcp") }

// TestSingleNodeHTTPNameToLoopback is TestSingleNodeNameToLoopback over
// the HTTP bridge: the router's HTTP client connects only when the call
// is made, and its connect-time refusal is still the 403
// endpoint_is_local answer, not provider_unreachable.
func TestSingleNodeHTTPNameToLoopback(t *testing.T) { singleNodeNameToLoopback(t, "http") }

func singleNodeNameToLoopback(t *testing.T, scheme string) {
	name := loopbackName(t)
	n, _, nodeSock := relayNode(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var accepted atomic.Int64
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := jsonrpc.NewServer(jsonrpc.Map{"identity.get": identity("named"), "named.get": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return "ok", nil
	}), "remote.get": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		accepted.Add(1)
		return "reached", nil
	})}, &jsonrpc.ServerOptions{Logger: quiet()})
	serveOn(t, srv, l, scheme)
	port := l.Addr().(*net.TCPAddr).Port
	register(t, nodeSock, "named", scheme+"://"+net.JoinHostPort(name, strconv.Itoa(port)), "named.get")

	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	if _, err := n.Enroll(ctx, base64.StdEncoding.EncodeToString(pub), nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	d := descriptor.New("agent-1", n.Config().Network, pub, []string{"remote.get"}, descriptor.Endpoint{Host: name, Port: port, Scheme: scheme}, time.Now(), time.Hour)
	if err := d.Sign(priv); err != nil {
		t.Fatal(err)
	}
	remote := jsonrpc.ContextWithPeer(ctx, jsonrpc.Peer{Transport: "tcp", Addr: "192.0.2.9:40000"})
	if _, err := n.Register(remote, d); err != nil {
		t.Fatalf("remote descriptor at %s: %v", name, err)
	}

	c, err := jsonrpc.Dial(ctx, "unix", nodeSock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var res string
	if err := c.Call(ctx, "named.get", map[string]any{}, &res); err != nil || res != "ok" {
		t.Errorf("local registration at %s: %q, %v", name, res, err)
	}
	err = c.Call(ctx, "remote.get", map[string]any{}, &res)
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != registry.CodeForbidden || !strings.Contains(string(je.Data), registry.CodeWordLocalEndpoint) {
		t.Errorf("remote descriptor at %s: %v, want %d endpoint_is_local", name, err, registry.CodeForbidden)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the remote descriptor's call reached this machine's loopback %d time(s)", n)
	}
}

// serveOn serves srv on l until the test ends: newline JSON-RPC for
// "tcp", the HTTP bridge for "http".
func serveOn(t *testing.T, srv *jsonrpc.Server, l net.Listener, scheme string) {
	t.Helper()
	if scheme == "http" {
		hs := &http.Server{Handler: jhttp.Handler(srv), ReadHeaderTimeout: testTimeout}
		done := make(chan struct{})
		go func() { defer close(done); _ = hs.Serve(l) }()
		t.Cleanup(func() { hs.Close(); <-done })
		return
	}
	sctx, scancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(sctx, l) }()
	t.Cleanup(func() { scancel(); <-done })
}
