package endpoint

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capmesh/capmesh/internal/nettest"
)

// TestLocalOnlySpellings: every spelling of this machine's addresses that
// the dialler reaches is local-only by its text: an empty host, zoned and
// IPv4-mapped loopback, unspecified and link-local addresses, localhost
// names; routable addresses and other names are not.
func TestLocalOnlySpellings(t *testing.T) {
	for _, ep := range []string{
		"unix:///run/x.sock",
		"tcp://:9000", "http://:8080/jsonrpc",
		"tcp://127.0.0.1:9000", "tcp://127.0.0.1%lo:9000", "tcp://[::ffff:127.0.0.1%lo]:9000",
		"tcp://[::ffff:127.0.0.1]:9000", "http://[::ffff:127.0.0.1%25lo]:8080/jsonrpc",
		"tcp://[::1%lo]:9000", "tcp://[::1%0]:9000", "tcp://[::1%nonexistent]:9000",
		"tcp://0.0.0.0:9000", "tcp://[::]:9000", "tcp://[::ffff:0:0]:9000",
		"tcp://169.254.169.254:80", "http://169.254.169.254/latest", "tcp://[fe80::1%eth0]:9000", "tcp://[::ffff:169.254.1.1]:80",
		"tcp://localhost:9000", "tcp://LOCALHOST.:9000", "tcp://a.localhost:9000", "tcp://ip6-localhost:9000",
		"tcp://ip6-loopback:9000", "tcp://localhost.localdomain:9000",
	} {
		if !LocalOnly(ep) {
			t.Errorf("LocalOnly(%s) = false, want true", ep)
		}
	}
	for _, ep := range []string{"tcp://192.0.2.7:9000", "tcp://[2001:db8::1]:9000", "tcp://[::ffff:192.0.2.7]:9000", "http://example.com/jsonrpc", "tcp://db.internal:5432", "not an endpoint"} {
		if LocalOnly(ep) {
			t.Errorf("LocalOnly(%s) = true, want false", ep)
		}
	}
}

// acceptCounter accepts and closes connections on l, counting them and
// signalling each on accepted.
func acceptCounter(t *testing.T, l net.Listener, accepted chan<- struct{}) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
			if accepted != nil {
				accepted <- struct{}{}
			}
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return &n
}

// TestRefuseLocalAtConnect: under RefuseLocal, the dialler refuses a
// connection whose destination is this machine — whatever the endpoint's
// spelling or name, checked on the address it actually connects to — and
// any Unix socket, with ErrLocalDestination and before the listener sees
// a connection; without it, the same dials connect.
func TestRefuseLocalAtConnect(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{}, 16)
	conns := acceptCounter(t, l, accepted)
	_, port, _ := net.SplitHostPort(l.Addr().String())
	sock := filepath.Join(t.TempDir(), "s.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	uconns := acceptCounter(t, ul, accepted)
	eps := []string{"tcp://127.0.0.1:" + port, "tcp://:" + port, "tcp://localhost:" + port, "tcp://[::ffff:127.0.0.1%lo]:" + port, "unix://" + sock}
	if h, err := os.Hostname(); err == nil {
		// a name of this machine (an /etc/hosts entry, 127.0.1.1 on
		// Debian): the text says nothing, the destination does
		if addrs, err := net.LookupHost(h); err == nil && len(addrs) > 0 && net.ParseIP(addrs[0]).IsLoopback() {
			eps = append(eps, "tcp://"+h+":"+port)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, ep := range eps {
		a, err := Parse(ep)
		if err != nil {
			t.Fatal(err)
		}
		c, err := DialConn(RefuseLocal(ctx), a)
		if err == nil {
			c.Close()
			t.Errorf("%s under RefuseLocal: connected", ep)
		} else if !errors.Is(err, ErrLocalDestination) {
			t.Errorf("%s under RefuseLocal: %v, want ErrLocalDestination", ep, err)
		}
		if c, err := DialConn(ctx, a); err != nil {
			t.Errorf("%s without RefuseLocal: %v", ep, err)
		} else {
			c.Close()
			select { // the listener saw it: every accept so far is counted
			case <-accepted:
			case <-ctx.Done():
				t.Fatalf("%s: no accept", ep)
			}
		}
	}
	if got, want := conns.Load()+uconns.Load(), int64(len(eps)); got != want {
		t.Errorf("the listeners accepted %d connections, want %d (the dials without RefuseLocal)", got, want)
	}
}

// TestRefuseLocalOverHTTP: an http endpoint dialled under RefuseLocal is
// refused when it leads to this machine; the client used without it
// reaches the same server (separate pools: a connection made for one
// never serves the other).
func TestRefuseLocalOverHTTP(t *testing.T) {
	var hits atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":"ok"}`))
	}))
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, refuse := range []bool{false, true, false, true} {
		dctx := ctx
		if refuse {
			dctx = RefuseLocal(ctx)
		}
		c, err := Dial(dctx, ts.URL)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = c.Call(dctx, "ping", nil, &got)
		c.Close()
		if refuse && !errors.Is(err, ErrLocalDestination) {
			t.Errorf("under RefuseLocal: %q, %v; want ErrLocalDestination", got, err)
		}
		if !refuse && err != nil {
			t.Errorf("without RefuseLocal: %v", err)
		}
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("the server answered %d calls, want 2", n)
	}
}

// TestRefuseLocalLetsRoutableThrough: under RefuseLocal a destination
// that is one of the machine's routable addresses (not loopback or
// link-local) is dialled as any other machine's.
func TestRefuseLocalLetsRoutableThrough(t *testing.T) {
	ip := net.ParseIP(nettest.RoutableIPv4(t))
	l, err := net.Listen("tcp4", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Skip(err)
	}
	acceptCounter(t, l, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := DialConn(RefuseLocal(ctx), Address{Scheme: "tcp", Host: l.Addr().String()})
	if err != nil {
		t.Fatalf("%s under RefuseLocal: %v", l.Addr(), err)
	}
	c.Close()
}

// TestReachesLocal: an endpoint whose text is local-only, or whose host
// name resolves to a local address, reaches this machine; a routable
// address or a name that does not resolve does not.
func TestReachesLocal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	local := []string{"tcp://localhost:1", "unix:///run/x.sock", "tcp://[::ffff:127.0.0.1%lo]:1"}
	if h, err := os.Hostname(); err == nil {
		if addrs, err := net.LookupHost(h); err == nil && len(addrs) > 0 && net.ParseIP(addrs[0]).IsLoopback() {
			local = append(local, "tcp://"+h+":1")
		}
	}
	for _, ep := range local {
		if !ReachesLocal(ctx, ep) {
			t.Errorf("ReachesLocal(%s) = false", ep)
		}
	}
	for _, ep := range []string{"tcp://192.0.2.7:1", "tcp://[2001:db8::1]:1", "tcp://no-such-host.invalid:1", "nonsense"} {
		if ReachesLocal(ctx, ep) {
			t.Errorf("ReachesLocal(%s) = true", ep)
		}
	}
}

// TestLocalAddrEmbeddedIPv4: the IPv6 forms that embed an IPv4 address a
// translator may deliver to — IPv4-compatible (::127.0.0.1), SIIT
// (::ffff:0:127.0.0.1) and NAT64 (64:ff9b::127.0.0.1) — are local when
// the embedded address is (127/8, 0/8, link-local), and so is 0/8
// itself; the same forms embedding a routable address are not, nor is
// another prefix. The guarded dialler refuses the local ones before
// connecting.
func TestLocalAddrEmbeddedIPv4(t *testing.T) {
	local := []string{"::127.0.0.1", "::7f00:1", "::127.1.2.3", "64:ff9b::7f00:1", "64:ff9b::127.0.0.2", "::ffff:0:7f00:1",
		"::ffff:0:127.0.0.1", "64:ff9b::0.0.0.0", "64:ff9b::169.254.169.254", "::ffff:0:0.1.2.3", "0.1.2.3", "0.0.0.1", "::ffff:0.0.0.1"}
	for _, s := range local {
		if !LocalAddr(netip.MustParseAddr(s)) {
			t.Errorf("LocalAddr(%s) = false, want true", s)
		}
		if ep := "tcp://" + net.JoinHostPort(s, "9000"); !LocalOnly(ep) {
			t.Errorf("LocalOnly(%s) = false, want true", ep)
		}
	}
	for _, s := range []string{"::192.0.2.7", "64:ff9b::192.0.2.7", "::ffff:0:192.0.2.7", "2001:db8::7f00:1", "64:ff9b:1::7f00:1", "1.0.0.1", "192.0.2.7"} {
		if LocalAddr(netip.MustParseAddr(s)) {
			t.Errorf("LocalAddr(%s) = true, want false", s)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range []string{"::127.0.0.1", "64:ff9b::7f00:1", "::ffff:0:7f00:1"} {
		a := Address{Scheme: "tcp", Host: net.JoinHostPort(s, "9")}
		if c, err := DialConn(RefuseLocal(ctx), a); !errors.Is(err, ErrLocalDestination) {
			if c != nil {
				c.Close()
			}
			t.Errorf("%s under RefuseLocal: %v, want ErrLocalDestination", a, err)
		}
	}
}
