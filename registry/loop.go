package registry

import (
	"context"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/internal/errcatalog"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry/internal/state"
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

// AddSelfEndpoints declares endpoints at which this node itself listens
// ("unix:///run/…/capmesh.sock", "tcp://127.0.0.1:9000",
// "http://127.0.0.1:8080/jsonrpc"; empty strings are ignored). A
// registration naming one of them — also through a symlink to the socket,
// or another local address with the same port — is refused, and the router
// skips such an entry registered before. Call it once the listeners are
// bound (a server learns its ports then).
func (n *Node) AddSelfEndpoints(eps ...string) error { return n.self.Add(eps...) }

// IsSelf reports whether ep (a normalized endpoint) reaches this node:
// the router never dials such an endpoint.
func (n *Node) IsSelf(ep string) bool { return n.self.Contains(ep) }

// refuseSelf is the registration-time check.
func (n *Node) refuseSelf(ep string) error {
	if n.IsSelf(ep) {
		return refuse(CodeWordSelfRoute, "endpoint %s is this registry node itself: routing to it would loop", ep)
	}
	return nil
}

// CodeWordLocalEndpoint refuses a signed descriptor from another machine
// that names an endpoint only this machine can reach (refuseForeignLocal),
// and a routed call to an endpoint local to another machine (MayDial).
const CodeWordLocalEndpoint = "endpoint_is_local"

// fromThisMachine reports whether the request in ctx came from this
// machine (endpoint.OnThisMachine). A call without a peer is the
// program's own (the Go API).
func fromThisMachine(ctx context.Context) bool {
	p, ok := jsonrpc.PeerFromContext(ctx)
	return !ok || endpoint.OnThisMachine(p)
}

// refuseForeignLocal is the registration-time check that a descriptor
// signed elsewhere cannot point this node's router at a service only this
// machine can reach (a database on 127.0.0.1, another user's socket).
func refuseForeignLocal(ctx context.Context, ep string) error {
	if endpoint.LocalOnly(ep) && !fromThisMachine(ctx) {
		return refuse(CodeWordLocalEndpoint, "endpoint %s reaches only the machine it is dialled from; a registration from another machine may not name it", ep)
	}
	return nil
}

// MayDial refuses (CodeWordLocalEndpoint) to dial e's endpoint from this
// node when it reaches only the machine it is dialled from and e was
// admitted on another machine (state.LocalElsewhere): the router lists
// such a provider but never connects to it.
func (n *Node) MayDial(e Entry) error {
	if state.LocalElsewhere(e, n.cfg.Machine, n.shared != nil) {
		return refuse(CodeWordLocalEndpoint, "%s: endpoint %s reaches only the machine it is dialled from, and was registered on another machine than this node's: call it through a node of that machine", e.Name, e.Endpoint)
	}
	return nil
}
