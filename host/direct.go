package host

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/chprpc"
	"github.com/capmesh/capmesh/internal/errcatalog"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/tracing"
)

// CodeForbidden answers a call the caller is not allowed to make (the
// catalog's Forbidden, the code the capmesh registry uses for a refusal by
// policy).
const CodeForbidden jsonrpc.Code = errcatalog.Forbidden

// direct returns the handler of a direct capability call (`kv.get`): the
// CHP boundary's own mapping (a synthesized envelope with correlation from
// params._meta, the gate pipeline, evidence made durable, chprpc.Reply),
// with two refinements so that a capability behaves like any JSON-RPC
// method to its caller:
//
//   - params that fail the input schema (a processed denial,
//     input_schema_validation_failed, with evidence) are answered -32602
//     Invalid params, the message naming the failing location;
//   - a handler error that carries a JSON-RPC code is answered with that
//     code and message.
//
// Either way the error's data is the complete InvocationResult, so the
// correlation and evidence ids are never lost.
//
// The caller's params._meta.traceparent, when valid, is the call's trace
// context (its trace id goes into the evidence and onto log lines); with
// Config.Tracer the dispatch is a span ("capmesh.host.dispatch").
func (h *Host) direct(params *paramsValidator) jsonrpc.Handler {
	inner := chprpc.DirectHandler(h.b)
	tr := h.cfg.Tracer
	return jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		if sc, ok := tracing.FromMeta(req.Params); ok {
			ctx = tracing.ContextWith(ctx, sc)
		}
		if tr == nil {
			return dispatch(ctx, inner, params, req)
		}
		ctx, sp := tr.Start(ctx, "capmesh.host.dispatch", tracing.KindServer)
		res, err := dispatch(ctx, inner, params, req)
		sp.SetAttributes(slog.String("rpc.system", "jsonrpc"), slog.String("rpc.method", req.Method))
		sp.End(err)
		return res, err
	})
}

// dispatch runs a direct capability call through inner, the boundary's
// binding, refining its errors as direct describes.
func dispatch(ctx context.Context, inner jsonrpc.Handler, params *paramsValidator, req *jsonrpc.Request) (any, error) {
	slot := &codeSlot{}
	res, err := inner.Handle(context.WithValue(ctx, codeSlotKey{}, slot), req)
	if err == nil {
		return res, nil
	}
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		return nil, err
	}
	switch je.Code {
	case chprpc.CodeDenied:
		var r chp.InvocationResult
		if json.Unmarshal(je.Data, &r) == nil && r.Denial != nil && r.Denial.Code == chp.CodeInputSchemaValidationFailed {
			why := r.Denial.Message
			if env, err := chprpc.EnvelopeFromRequest(req); err == nil {
				if s := params.explain(env.Payload); s != "" {
					why = s
				}
			}
			return nil, &jsonrpc.Error{Code: jsonrpc.InvalidParams, Message: "Invalid params: " + why, Data: je.Data}
		}
	case chprpc.CodeFailed:
		if slot.err != nil {
			msg := slot.err.Message
			if msg == "" {
				msg = slot.err.Code.String()
			}
			return nil, &jsonrpc.Error{Code: slot.err.Code, Message: msg, Data: je.Data}
		}
	}
	return nil, err
}

// ownPeer reports whether the caller is this process itself (no peer) or a
// Unix-socket peer of the host's own user.
func ownPeer(ctx context.Context) bool {
	p, ok := jsonrpc.PeerFromContext(ctx)
	if !ok {
		return true
	}
	return p.Transport == "unix" && p.HasCred && int(p.UID) == os.Getuid()
}
