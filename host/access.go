package host

import (
	"context"

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

// mountedOp is the operation of a method a mounted assigner answers: what
// the assigner says (access.Classifier), else an invocation.
func mountedOp(m jsonrpc.Assigner, name string) access.Op {
	if c, ok := m.(access.Classifier); ok {
		return c.AccessOp(name)
	}
	return access.OpInvoke
}
