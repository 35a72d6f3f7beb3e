package etcd_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/jsonrpc/jhttp"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/descriptor"
)

// loopbackName returns a host name of this machine that resolves to a
// loopback address without saying so (the host name, an /etc/hosts
// entry), or "" when there is none.
func loopbackName() string {
	names := []string{"vm", "runsc"}
	if h, err := os.Hostname(); err == nil {
		names = append([]string{h}, names...)
	}
	for _, n := range names {
		addrs, err := net.LookupHost(n)
		if err == nil && len(addrs) > 0 && net.ParseIP(addrs[0]).IsLoopback() {
			return n
		}
	}
	return ""
}

// wantLocalRefusal checks that err is the router's 403 endpoint_is_local
// and that the provider saw no connection.
func wantLocalRefusal(t *testing.T, what string, err error, conns *atomic.Int64, before int64) {
	t.Helper()
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != registry.CodeForbidden || !hasWord(je, registry.CodeWordLocalEndpoint) {
		t.Errorf("%s: %v, want %d %s", what, err, registry.CodeForbidden, registry.CodeWordLocalEndpoint)
	}
	if d := conns.Load() - before; d != 0 {
		t.Errorf("%s: the provider saw %d connection(s)", what, d)
	}
}

// TestLoopbackSpellingsDialledOnlyOnTheirMachine: endpoints that reach
// the dialling machine's loopback under another spelling — an empty host
// (tcp://:PORT), a zoned IPv4-mapped address, a host name resolving to
// loopback — registered on machine 1 are routed by machine 1's node and
// refused (403 endpoint_is_local, no connection) by machine 2's; a
// remote registrant naming a zoned loopback is refused at registration,
// and one naming a host name that resolves to loopback is refused at
// connect time on every machine. Before, machine 2's router dialled its
// own loopback for all of them.
func TestLoopbackSpellingsDialledOnlyOnTheirMachine(t *testing.T) {
	srv := etcdtest.Start(t)
	a, ca := joinOn(t, srv, "/spell/", "machine-1")
	b, cb := joinOn(t, srv, "/spell/", "machine-2")
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()

	type provider struct {
		method string
		conns  *atomic.Int64
	}
	var local []provider
	register := func(name, method, host string) {
		l := listen(t, "tcp", "127.0.0.1:0")
		conns := countingHost(t, name, l)
		ep := "tcp://" + net.JoinHostPort(host, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
		if _, _, err := a.RegisterLocal(ctx, localPeer(), registry.LocalRegistration{Name: name, Capabilities: []string{method}, Endpoint: ep}); err != nil {
			t.Fatalf("local registration of %s: %v", ep, err)
		}
		local = append(local, provider{method, conns})
	}
	register("emptyhost", "crypto.sign", "")
	register("zoned", "kv.get", "::ffff:127.0.0.1%lo")
	name := loopbackName()
	if name != "" {
		register("named", "named.get", name)
	} else {
		t.Log("no host name resolving to loopback here: the named cases are not run")
	}

	priv, key := nodeKey(t)
	if _, err := a.Enroll(ctx, key, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	remote := jsonrpc.ContextWithPeer(ctx, jsonrpc.Peer{Transport: "tcp", Addr: "192.0.2.9:40000"})
	signed := func(agent, host string, port int, caps ...string) *descriptor.Descriptor {
		d := descriptor.New(agent, "capmesh", priv.Public().(ed25519.PublicKey), caps, descriptor.Endpoint{Host: host, Port: port, Scheme: "tcp"}, time.Now(), time.Hour)
		if err := d.Sign(priv); err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, host := range []string{"::ffff:127.0.0.1%lo", "::1%lo", "", "169.254.169.254"} {
		if _, err := a.Register(remote, signed("agent-x", host, 7000, "sign.remote")); errWord(err) != registry.CodeWordLocalEndpoint {
			t.Errorf("remote descriptor at %q: %v, want %s", host, err, registry.CodeWordLocalEndpoint)
		}
	}
	var named provider
	if name != "" {
		l := listen(t, "tcp", "127.0.0.1:0")
		named = provider{"remote.get", countingHost(t, "agent-1", l)}
		if _, err := a.Register(remote, signed("agent-1", name, l.Addr().(*net.TCPAddr).Port, "remote.get")); err != nil {
			t.Fatalf("remote descriptor at %s: %v", name, err)
		}
	}
	waitFor(t, func() bool {
		for _, p := range append(local, named) {
			if p.conns != nil && len(b.Find(p.method, registry.FindOptions{})) != 1 {
				return false
			}
		}
		return true
	})
	for _, p := range local {
		before := p.conns.Load()
		wantLocalRefusal(t, p.method+" through b on machine 2", cb.Call(ctx, p.method, map[string]any{}, nil), p.conns, before)
		var res string
		if err := ca.Call(ctx, p.method, map[string]any{}, &res); err != nil || res != "ok" {
			t.Errorf("%s through a on machine 1: %q, %v", p.method, res, err)
		}
	}
	if named.conns != nil {
		for node, c := range map[string]*jsonrpc.Client{"a on machine 1": ca, "b on machine 2": cb} {
			before := named.conns.Load()
			wantLocalRefusal(t, "remote descriptor at "+name+" through "+node, c.Call(ctx, named.method, map[string]any{}, nil), named.conns, before)
		}
		err := cb.Call(ctx, "ipc.resolve", map[string]any{"capability": named.method}, nil)
		var je *jsonrpc.Error
		if !errors.As(err, &je) || !hasWord(je, registry.CodeWordLocalEndpoint) {
			t.Errorf("ipc.resolve of the remote descriptor at %s: %v, want %s", name, err, registry.CodeWordLocalEndpoint)
		}
	}
}

// TestHTTPNameToLoopbackRefusedElsewhere: a local registration of
// machine 1 at an http:// URL whose host name resolves to loopback is
// routed by machine 1's node and refused by machine 2's with the
// machine-binding answer (403 endpoint_is_local), without a connection.
// The HTTP bridge connects only when the call is made, so the refusal
// used to come from the call, not the dial, and read −32011
// provider_unreachable.
func TestHTTPNameToLoopbackRefusedElsewhere(t *testing.T) {
	name := loopbackName()
	if name == "" {
		t.Skip("no host name resolving to loopback here")
	}
	srv := etcdtest.Start(t)
	a, ca := joinOn(t, srv, "/httpname/", "machine-1")
	b, cb := joinOn(t, srv, "/httpname/", "machine-2")
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var conns atomic.Int64
	ok := jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) { return "ok", nil })
	js := jsonrpc.NewServer(jsonrpc.Map{
		"identity.get": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
			return map[string]string{"primal": "named"}, nil
		}),
		"named.get": ok,
	}, nil)
	l := listen(t, "tcp", "127.0.0.1:0")
	hs := &http.Server{Handler: jhttp.Handler(js), ReadHeaderTimeout: deadline}
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.Serve(countListener{l, &conns}) }()
	t.Cleanup(func() { hs.Close(); <-done })
	ep := "http://" + net.JoinHostPort(name, strconv.Itoa(l.Addr().(*net.TCPAddr).Port)) + "/jsonrpc"
	if _, _, err := a.RegisterLocal(ctx, localPeer(), registry.LocalRegistration{Name: "named", Capabilities: []string{"named.get"}, Endpoint: ep}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(b.Find("named.get", registry.FindOptions{})) == 1 })
	var res string
	if err := ca.Call(ctx, "named.get", map[string]any{}, &res); err != nil || res != "ok" {
		t.Errorf("through a on machine 1: %q, %v", res, err)
	}
	before := conns.Load()
	wantLocalRefusal(t, "through b on machine 2", cb.Call(ctx, "named.get", map[string]any{}, nil), &conns, before)
}
