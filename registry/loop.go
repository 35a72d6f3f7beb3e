package registry

import (
	"context"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/capmesh/capmesh/internal/errcatalog"
	"github.com/capmesh/capmesh/jsonrpc"
)

// Routing-loop protection (docs/routing.md): every routed request carries
// a hop count in params._meta.hops, and the node never registers or routes
// to an endpoint of its own.

// DefaultMaxHops is Config.MaxHops' default: the routers a request may
// pass through, as the network policy's routing.max_hops.
const DefaultMaxHops = 6

// CodeHopLimit is the answer to a routed request whose _meta.hops has
// reached the node's MaxHops: it has been forwarded in a circle (or along
// a chain too long to be honest).
const CodeHopLimit jsonrpc.Code = errcatalog.HopLimitExceeded

// Refusal words of the loop protection.
const (
	CodeWordHopLimit  = "hop_limit_exceeded"
	CodeWordSelfRoute = "endpoint_is_this_node"
)

// selfEndpoints are the node's own listeners, which no registration may
// name and the router never dials.
type selfEndpoints struct {
	mu    sync.RWMutex
	paths map[string]os.FileInfo // Unix socket path → its file, for os.SameFile
	ports map[string]bool        // TCP ports the node listens on
	local map[string]bool        // IP addresses of this machine's interfaces
}

// AddSelfEndpoints declares endpoints at which this node itself listens
// ("unix:///run/…/capmesh.sock", "tcp://127.0.0.1:9000",
// "http://127.0.0.1:8080/jsonrpc"; empty strings are ignored). A
// registration naming one of them — also through a symlink to the socket,
// or another local address with the same port — is refused, and the router
// skips such an entry registered before. Call it once the listeners are
// bound (a server learns its ports then).
func (n *Node) AddSelfEndpoints(eps ...string) error {
	s := &n.self
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paths == nil {
		s.paths, s.ports, s.local = map[string]os.FileInfo{}, map[string]bool{}, map[string]bool{}
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok {
					s.local[ipn.IP.String()] = true
				}
			}
		}
	}
	for _, ep := range eps {
		if ep == "" {
			continue
		}
		u, err := NormalizeEndpoint(ep)
		if err != nil {
			return err
		}
		if path, ok := strings.CutPrefix(u, "unix://"); ok {
			fi, _ := os.Stat(path)
			s.paths[path] = fi
			continue
		}
		if _, port, ok := hostPort(u); ok {
			s.ports[port] = true
		}
	}
	return nil
}

// IsSelf reports whether ep (a normalized endpoint) reaches this node:
// the router never dials such an endpoint.
func (n *Node) IsSelf(ep string) bool {
	s := &n.self
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.paths) == 0 && len(s.ports) == 0 {
		return false
	}
	if path, ok := strings.CutPrefix(ep, "unix://"); ok {
		if _, ok := s.paths[path]; ok {
			return true
		}
		fi, err := os.Stat(path)
		if err != nil {
			return false
		}
		for _, own := range s.paths {
			if own != nil && os.SameFile(fi, own) {
				return true
			}
		}
		return false
	}
	host, port, ok := hostPort(ep)
	if !ok || !s.ports[port] {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsUnspecified() || s.local[ip.String()])
}

// hostPort splits a tcp://, http:// or https:// endpoint.
func hostPort(ep string) (host, port string, ok bool) {
	if hp, found := strings.CutPrefix(ep, "tcp://"); found {
		h, p, err := net.SplitHostPort(hp)
		return h, p, err == nil
	}
	u, err := url.Parse(ep)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", "", false
	}
	port = u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Hostname(), port, true
}

// refuseSelf is the registration-time check.
func (n *Node) refuseSelf(ep string) error {
	if n.IsSelf(ep) {
		return refuse(CodeWordSelfRoute, "endpoint %s is this registry node itself: routing to it would loop", ep)
	}
	return nil
}

// CodeWordLocalEndpoint refuses a signed descriptor from another machine
// that names an endpoint only this machine can reach.
const CodeWordLocalEndpoint = "endpoint_is_local"

// localOnly reports whether ep (a normalized endpoint) names an address
// that reaches the machine it is dialled from, whichever machine that is:
// a Unix socket, a loopback or unspecified IP, or "localhost".
func localOnly(ep string) bool {
	if strings.HasPrefix(ep, "unix://") {
		return true
	}
	host, _, ok := hostPort(ep)
	if !ok {
		return false
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") || strings.HasSuffix(strings.ToLower(strings.TrimSuffix(host, ".")), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsUnspecified())
}

// fromThisMachine reports whether the request in ctx came from this
// machine: a Unix-socket peer, or a TCP or HTTP peer at a loopback
// address. A call without a peer is the program's own (the Go API).
func fromThisMachine(ctx context.Context) bool {
	p, ok := jsonrpc.PeerFromContext(ctx)
	if !ok {
		return true
	}
	if p.Transport == "unix" {
		return true
	}
	host, _, err := net.SplitHostPort(p.Addr)
	if err != nil {
		host = p.Addr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// refuseForeignLocal is the registration-time check that a descriptor
// signed elsewhere cannot point this node's router at a service only this
// machine can reach (a database on 127.0.0.1, another user's socket).
func refuseForeignLocal(ctx context.Context, ep string) error {
	if localOnly(ep) && !fromThisMachine(ctx) {
		return refuse(CodeWordLocalEndpoint, "endpoint %s reaches only the machine it is dialled from; a registration from another machine may not name it", ep)
	}
	return nil
}
