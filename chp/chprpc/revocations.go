package chprpc

import (
	"bytes"
	"context"
	"errors"
	"os"

	"github.com/capmesh/capmesh/access"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/boundary/mandates"
	"github.com/capmesh/capmesh/internal/errcatalog"
	"github.com/capmesh/capmesh/jsonrpc"
)

// revocationHandlers are the JSON-RPC counterparts of GET and POST
// /revocations: chp.revocations answers the held set {keys, mandates};
// chp.revoke takes a mandate-revocation statement as params and answers
// {accepted, mandate_id, principal}, or -32602 when the statement is
// malformed or does not verify (nothing is kept then). The host's operator
// (an in-process call, or a Unix peer of the host's own uid) may revoke
// any mandate; any other caller only one this host has seen issued under
// the statement's key (-32003, data.code not_issuer), within the
// per-issuer and global bounds (-32046, data.code issuer_quota_exceeded or
// revocations_full).
func revocationHandlers(b *boundary.Boundary) map[string]jsonrpc.Handler {
	return map[string]jsonrpc.Handler{
		"chp.revocations": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
			return b.Revocations(), nil
		}),
		"chp.revoke": jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			if len(bytes.TrimSpace(req.Params)) == 0 {
				return nil, jsonrpc.Errorf(jsonrpc.InvalidParams, "chp.revoke takes a mandate-revocation object")
			}
			a, err := b.AcceptRevocation(req.Params, isOperator(ctx))
			switch {
			case errors.Is(err, mandates.ErrBadRevocation):
				return nil, jsonrpc.Errorf(jsonrpc.InvalidParams, "invalid_revocation: %v", err)
			case errors.Is(err, mandates.ErrNotIssuer):
				return nil, jsonrpc.Errorf(errcatalog.Forbidden, "%v", err).WithData(map[string]string{"code": "not_issuer"})
			case errors.Is(err, mandates.ErrIssuerQuota):
				return nil, jsonrpc.Errorf(CodeQuotaExceeded, "%v", err).WithData(map[string]string{"code": "issuer_quota_exceeded"})
			case errors.Is(err, mandates.ErrTooManyRevocations):
				return nil, jsonrpc.Errorf(CodeQuotaExceeded, "%v", err).WithData(map[string]string{"code": "revocations_full"})
			case err != nil:
				return nil, jsonrpc.Errorf(jsonrpc.InternalError, "the revocation could not be kept: %v", err)
			}
			return a, nil
		}),
	}
}

// isOperator reports whether the caller of ctx is the host's operator: the
// same user as the access layer resolves it (docs/access.md) — a call in
// process or through the host's own pipe, a Unix peer of the host's uid,
// or a caller a same-user node attests as such.
func isOperator(ctx context.Context) bool {
	return access.Resolve(ctx, uint32(os.Getuid())).Kind == access.SameUser
}
