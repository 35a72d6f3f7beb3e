package endpoint

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/capmesh/capmesh/jsonrpc/jhttp"
)

// Machine binding at connect time. LocalOnly reads an endpoint's text; a
// host name (the machine's own, an /etc/hosts entry, a DNS name such as
// 127.0.0.1.nip.io) reaches this machine's loopback all the same. So a
// dial of a registered endpoint that must not reach the dialling machine
// carries RefuseLocal in its context, and this package's dialler checks
// the address it actually connects to (a net.Dialer ControlContext hook):
// loopback, unspecified and link-local destinations are refused, and so
// is every Unix socket (decided by the address's scheme).

// ErrLocalDestination is the error of a dial refused because, under
// RefuseLocal, it would have connected to the dialling machine itself
// (errors.Is; a DialError or an HTTP transport error wraps it).
var ErrLocalDestination = errors.New("endpoint: the destination is on the dialling machine (loopback, link-local or a Unix socket), and this endpoint was not registered on it")

type refuseLocalKey struct{}

// RefuseLocal returns ctx under which the dials of this package (Dial,
// DialAddress, DialConn, HTTPClients.For) refuse to connect to the machine
// they run on: a Unix socket, or a TCP connection whose destination
// address is loopback, unspecified or link-local (LocalAddr) — whatever
// name or spelling the endpoint used to get there. A registry's router
// dials an endpoint under it unless the endpoint was registered on this
// machine.
func RefuseLocal(ctx context.Context) context.Context {
	return context.WithValue(ctx, refuseLocalKey{}, true)
}

// LocalRefused reports whether ctx carries RefuseLocal.
func LocalRefused(ctx context.Context) bool {
	v, _ := ctx.Value(refuseLocalKey{}).(bool)
	return v
}

// LocalAddr reports whether a reaches only the machine it is dialled
// from, or its link: a loopback, unspecified or link-local address
// (169.254.0.0/16, fe80::/10, which also hold each machine's own metadata
// service), an address of 0.0.0.0/8 ("this network": a destination on no
// other machine), whatever its zone, in any IPv6 form that embeds an IPv4
// address: IPv4-mapped (::ffff:0:0/96), IPv4-compatible (::/96), SIIT
// (::ffff:0:0:0/96) and NAT64 (64:ff9b::/96), which a translator on the
// way may deliver to that IPv4 address.
func LocalAddr(a netip.Addr) bool {
	a = embeddedV4(a.WithZone("").Unmap())
	if a.Is4() && a.As4()[0] == 0 {
		return true // 0.0.0.0/8
	}
	return a.IsLoopback() || a.IsUnspecified() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast()
}

// embeddedV4 is the IPv4 address an IPv6 address a embeds in its last 32
// bits under an IPv4-compatible (::/96, but not :: and ::1 themselves),
// SIIT (::ffff:0:0:0/96) or NAT64 (64:ff9b::/96) prefix; otherwise a.
func embeddedV4(a netip.Addr) netip.Addr {
	if !a.Is6() || a == netip.IPv6Unspecified() || a == netip.IPv6Loopback() {
		return a
	}
	b := a.As16()
	var prefix [12]byte
	copy(prefix[:], b[:12])
	switch prefix {
	case [12]byte{}, [12]byte{8: 0xff, 9: 0xff}, [12]byte{0: 0x00, 1: 0x64, 2: 0xff, 3: 0x9b}:
		return netip.AddrFrom4([4]byte(b[12:]))
	}
	return a
}

// guardControl is the dialler's ControlContext: under RefuseLocal it
// refuses a socket about to connect to a local destination.
func guardControl(ctx context.Context, network, address string, _ syscall.RawConn) error {
	if !LocalRefused(ctx) {
		return nil
	}
	if strings.HasPrefix(network, "unix") {
		return ErrLocalDestination
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return ErrLocalDestination // not an IP destination: nothing says it is not local
	}
	if LocalAddr(ap.Addr()) {
		return ErrLocalDestination
	}
	return nil
}

// dialer returns the dialler of this package: guarded, with timeout
// when ctx has no deadline.
func dialer(ctx context.Context) *net.Dialer {
	d := &net.Dialer{ControlContext: guardControl}
	if _, ok := ctx.Deadline(); !ok {
		d.Timeout = DefaultDialTimeout
	}
	return d
}

// HTTPClients are the http.Clients of JSON-RPC calls over HTTP to
// registered endpoints: http.DefaultTransport's settings, but they never
// follow a redirect (jhttp.NoRedirect) and connect through this package's
// guarded dialler. One transport refuses local destinations (and uses no
// proxy, which would connect in its place) and the other does not, so
// that a pooled connection made for one kind of dial never serves the
// other.
type HTTPClients struct {
	open, guarded *http.Client
}

// NewHTTPClients returns the clients, each call bounded as a whole by
// timeout (0: none).
func NewHTTPClients(timeout time.Duration) *HTTPClients {
	mk := func(refuse bool) *http.Client {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if refuse {
				ctx = RefuseLocal(ctx)
			}
			return dialer(ctx).DialContext(ctx, network, addr)
		}
		if refuse {
			tr.Proxy = nil // a proxy would connect in our place, anywhere
		}
		return &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: jhttp.NoRedirect}
	}
	return &HTTPClients{open: mk(false), guarded: mk(true)}
}

// For returns the client for a dial under ctx: the one refusing local
// destinations when ctx carries RefuseLocal.
func (h *HTTPClients) For(ctx context.Context) *http.Client {
	if LocalRefused(ctx) {
		return h.guarded
	}
	return h.open
}

// httpClients serve DialAddress's http(s) endpoints.
var httpClients = NewHTTPClients(0)

// ReachesLocal reports whether ep (a normalized endpoint) leads to the
// machine it is dialled from: LocalOnly, or a host name that resolves,
// now, to a local address (LocalAddr). A name that does not resolve is
// not local (a dial of it fails anyway). It is the check for an answer
// that a caller will dial itself, such as ipc.resolve's; a dial made by
// this package is checked on its actual destination (RefuseLocal).
func ReachesLocal(ctx context.Context, ep string) bool {
	if LocalOnly(ep) {
		return true
	}
	host, _, ok := hostPort(ep)
	if !ok {
		return false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return false // an address LocalOnly found routable
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if LocalAddr(a) {
			return true
		}
	}
	return false
}

// RegistryAnswers returns ctx for dialling the endpoints that a registry
// reached at reg (an endpoint: a socket path, "unix://…", "tcp://…", an
// http(s) URL) answered with. A registry of this machine — over a Unix
// socket, or at an address that reaches this machine (ReachesLocal) —
// lists endpoints this machine dials as they are: ctx. Any other
// registry is another machine's node: a Unix socket or a loopback
// address in its answers names a service of that machine, which a dial
// here would find on this machine instead. So its answers are dialled
// under RefuseLocal, and a client skips its local-only ones (LocalOnly)
// without dialling them. A registry reached at one of this machine's
// other addresses (a LAN address) counts as another machine's.
func RegistryAnswers(ctx context.Context, reg string) context.Context {
	if n, err := Normalize(reg); err == nil {
		reg = n
	}
	if ReachesLocal(ctx, reg) {
		return ctx
	}
	return RefuseLocal(ctx)
}

// SkipLocal reports whether a client dialling under ctx skips ep: ctx
// refuses local destinations and ep names one by its text (LocalOnly),
// so the dial could only be refused.
func SkipLocal(ctx context.Context, ep string) bool {
	if n, err := Normalize(ep); err == nil {
		ep = n
	}
	return LocalRefused(ctx) && LocalOnly(ep)
}
