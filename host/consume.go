package host

import (
	"context"
	"fmt"
	"os"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
)

// Provider connects to a host that answers method, for a host that
// consumes other hosts' capabilities (see Consumes): Config.Node when set
// (a capmesh node routes the call), else the discovery order of the Primal
// IPC Protocol (endpoint.Discover: $<DOMAIN>_SOCKET, the domain symlink,
// the socket directory, the registry, $<DOMAIN>_TCP), so that a consumer
// keeps working while no node runs. A socket of this host itself is never
// the answer. The caller closes the returned connection.
func (h *Host) Provider(ctx context.Context, method string) (jsonrpc.Caller, error) {
	if h.cfg.Node != "" {
		return endpoint.Dial(ctx, h.cfg.Node)
	}
	c, f, err := endpoint.Discover(ctx, endpoint.Query{Method: method, Route: true})
	if err != nil {
		return nil, err
	}
	if self := h.Addr("unix"); self != "" && f.Addr.Scheme == "unix" && sameFile(f.Addr.Path, self) {
		c.Close()
		return nil, fmt.Errorf("host: %s: discovery found this host's own socket %s", method, f.Addr.Path)
	}
	return c, nil
}

// sameFile reports whether two paths name the same file (a domain symlink
// and the socket it points at do).
func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}
