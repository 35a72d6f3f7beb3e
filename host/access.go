package host

import (
	"context"
	"strings"

	"github.com/capmesh/capmesh/access"
	"github.com/capmesh/capmesh/jsonrpc"
)

// gate puts hd behind the host's access policy for op (docs/access.md):
// the caller's principal is established from the connection's peer, the
// HTTP key, params._meta (a key, or a same-user node's attestation), and
// op authorized for it before hd runs. Public methods are not wrapped.
func (h *Host) gate(op access.Op, hd jsonrpc.Handler) jsonrpc.Handler {
	if op == access.OpPublic {
		return hd
	}
	return jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		ctx, err := h.acc.Check(ctx, op, req.Params)
		if err != nil {
			return nil, err
		}
		return hd.Handle(ctx, req)
	})
}

// mountedOp classifies a mounted method (the node's registry surface):
// registration goes to the registry's own checks, the operator methods
// need the same user, discovery is public, and everything else — a
// capability.call, a routed domain.operation, a raw method — is an
// invocation.
func mountedOp(name string) access.Op {
	switch name {
	case "ipc.register", "ipc.heartbeat", "ipc.unregister":
		return access.OpRegister
	case "registry.enroll", "registry.invite", "registry.revoke":
		return access.OpAdminister
	case "ipc.resolve", "ipc.discover", "ipc.find_capability", "ipc.list", "ipc.watch",
		"capability.discover", "registry.certificates", "registry.crl", "registry.info":
		return access.OpPublic
	}
	if strings.HasPrefix(name, "health.") {
		return access.OpPublic
	}
	return access.OpInvoke
}
