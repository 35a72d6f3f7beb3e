package chprpc

import (
	"bytes"
	"context"
	"errors"

	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/boundary/mandates"
	"github.com/capmesh/capmesh/jsonrpc"
)

// revocationHandlers are the JSON-RPC counterparts of GET and POST
// /revocations: chp.revocations answers the held set {keys, mandates};
// chp.revoke takes a mandate-revocation statement as params and answers
// {accepted, mandate_id, principal}, or -32602 when the statement is
// malformed or does not verify (nothing is kept then).
func revocationHandlers(b *boundary.Boundary) map[string]jsonrpc.Handler {
	return map[string]jsonrpc.Handler{
		"chp.revocations": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
			return b.Revocations(), nil
		}),
		"chp.revoke": jsonrpc.HandlerFunc(func(_ context.Context, req *jsonrpc.Request) (any, error) {
			if len(bytes.TrimSpace(req.Params)) == 0 {
				return nil, jsonrpc.Errorf(jsonrpc.InvalidParams, "chp.revoke takes a mandate-revocation object")
			}
			a, err := b.AcceptRevocation(req.Params)
			if errors.Is(err, mandates.ErrBadRevocation) {
				return nil, jsonrpc.Errorf(jsonrpc.InvalidParams, "invalid_revocation: %v", err)
			}
			if err != nil {
				return nil, jsonrpc.Errorf(jsonrpc.InternalError, "the revocation could not be kept: %v", err)
			}
			return a, nil
		}),
	}
}
