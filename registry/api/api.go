// Package api serves a registry.Node to the network: the ipc.* and
// registry.* JSON-RPC methods with the router that forwards any other
// domain.operation to a live, trusted provider (RPC), and the RFC-005
// Network-Authority HTTP surface (HTTPHandler). The registry's state,
// trust and storage stay in package registry; this package only decodes
// requests, asks the node, and encodes its answers.
package api

import (
	"net/http"

	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
)

// server is one binding of a node: the node, its configuration and, for
// the HTTP surface, its per-client rate limits.
type server struct {
	*registry.Node
	cfg    registry.Config
	limits httpLimiters
}

func newServer(n *registry.Node) *server {
	cfg := n.Config()
	s := &server{Node: n, cfg: cfg, limits: newHTTPLimiters(cfg.RateLimits, cfg.Now)}
	if cfg.Observer != nil {
		s.limits.observe(cfg.Observer)
	}
	return s
}

// RPC returns n's JSON-RPC surface as an Assigner: the ipc.* registry
// methods, capability.call/discover, the registry.* operator methods, and
// — for any other name that looks like domain.operation — routing to a
// provider, as the Neural API does. Mount it on a jsonrpc.Server, or
// combine it with other methods (it implements Lister).
func RPC(n *registry.Node) jsonrpc.Assigner {
	s := newServer(n)
	return &rpcAssigner{n: s, m: s.methods()}
}

// HTTPHandler returns n's RFC-005 HTTP surface (the routes HTTPRoutes
// lists), with its own per-client rate limits.
func HTTPHandler(n *registry.Node) http.Handler { return newServer(n).httpHandler() }
