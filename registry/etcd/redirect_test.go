package etcd_test

import (
	"context"
	"crypto/ed25519"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/internal/nettest"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/descriptor"
)

// routableIP returns an address of one of this machine's interfaces that
// is neither loopback nor link-local (what a remote registrant may name),
// or skips the test when the machine has none.
func routableIP(t *testing.T) string { return nettest.RoutableIPv4(t) }

// serveHTTP serves h on l until the test ends.
func serveHTTP(t *testing.T, l net.Listener, h http.Handler) {
	t.Helper()
	s := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(l) }()
	t.Cleanup(func() { s.Close(); <-done })
}

// TestRoutedCallNeverFollowsRedirect: a remote registrant's signed
// descriptor names a routable http endpoint (admitted: it is not
// local-only) whose server answers every call with 307 to a loopback
// URL. Node b's router, on another machine, routes a call there and
// fails: it never re-posts the call (with the caller's claims) to the
// loopback service of its own machine.
func TestRoutedCallNeverFollowsRedirect(t *testing.T) {
	ip := routableIP(t)
	var hits atomic.Int64
	lo := listen(t, "tcp", "127.0.0.1:0")
	serveHTTP(t, lo, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":"from loopback"}`))
	}))
	ext := listen(t, "tcp", net.JoinHostPort(ip, "0"))
	target := "http://" + lo.Addr().String() + "/jsonrpc"
	serveHTTP(t, ext, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusTemporaryRedirect)
	}))

	srv := etcdtest.Start(t)
	a, _ := joinOn(t, srv, "/redir/", "machine-1")
	b, cb := joinOn(t, srv, "/redir/", "machine-2")
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	priv, key := nodeKey(t)
	if _, err := a.Enroll(ctx, key, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	d := descriptor.New("agent-1", "capmesh", priv.Public().(ed25519.PublicKey), []string{"evil.call"},
		descriptor.Endpoint{Host: ip, Port: ext.Addr().(*net.TCPAddr).Port, Scheme: "http"}, time.Now(), time.Hour)
	if err := d.Sign(priv); err != nil {
		t.Fatal(err)
	}
	remote := jsonrpc.ContextWithPeer(ctx, jsonrpc.Peer{Transport: "tcp", Addr: "198.51.100.7:40000"})
	if _, err := a.Register(remote, d); err != nil {
		t.Fatalf("remote registration: %v", err)
	}
	waitFor(t, func() bool { return len(b.Find("evil.call", registry.FindOptions{})) == 1 })
	var res string
	err := cb.Call(ctx, "evil.call", map[string]any{"x": 1}, &res)
	if err == nil {
		t.Errorf("evil.call through b answered %q", res)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("node b's router followed the redirect to its machine's loopback %d time(s)", n)
	}
}
