package host

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/tracing"
)

// Provider connects to a host that answers method, for a host that
// consumes other hosts' capabilities (see Consumes): Config.Node when set
// (a capmesh node routes the call), else the discovery order of the Primal
// IPC Protocol (endpoint.Discover: $<DOMAIN>_SOCKET, the domain symlink,
// the socket directory, the registry, $<DOMAIN>_TCP), so that a consumer
// keeps working while no node runs. A socket of this host itself is never
// the answer. The caller closes the returned connection.
//
// Calls on it carry the trace context of their ctx (a handler's: the
// invocation's) in params._meta.traceparent, each in a client span
// ("capmesh.call") when Config.Tracer is set, so that the provider's work
// joins the caller's trace.
func (h *Host) Provider(ctx context.Context, method string) (jsonrpc.Caller, error) {
	c, err := h.provider(ctx, method)
	if err != nil {
		return nil, err
	}
	return &tracedCaller{Caller: c, tr: h.cfg.Tracer}, nil
}

func (h *Host) provider(ctx context.Context, method string) (jsonrpc.Caller, error) {
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

// tracedCaller passes the trace context of each call's ctx on in
// params._meta.traceparent (see Provider).
type tracedCaller struct {
	jsonrpc.Caller
	tr tracing.Tracer
}

func (c *tracedCaller) Call(ctx context.Context, method string, params, result any) error {
	if c.tr == nil {
		sc, ok := tracing.FromContext(ctx)
		if ok {
			params = withTraceparent(params, sc)
		}
		return c.Caller.Call(ctx, method, params, result)
	}
	ctx, sp := c.tr.Start(ctx, "capmesh.call", tracing.KindClient)
	sp.SetAttributes(slog.String("rpc.system", "jsonrpc"), slog.String("rpc.method", method))
	err := c.Caller.Call(ctx, method, withTraceparent(params, sp.SpanContext()), result)
	sp.End(err)
	return err
}

func (c *tracedCaller) Notify(ctx context.Context, method string, params any) error {
	if sc, ok := tracing.FromContext(ctx); ok {
		params = withTraceparent(params, sc)
	}
	return c.Caller.Notify(ctx, method, params)
}

// withTraceparent is params (encoded) with _meta.traceparent set to sc's;
// params that cannot carry it (not an object) go unchanged.
func withTraceparent(params any, sc tracing.SpanContext) any {
	if !sc.IsValid() {
		return params
	}
	var raw json.RawMessage
	switch p := params.(type) {
	case nil:
	case json.RawMessage:
		raw = p
	case []byte:
		raw = p
	default:
		b, err := json.Marshal(p)
		if err != nil {
			return params // the call reports it
		}
		raw = b
	}
	out, err := tracing.WithMeta(raw, sc)
	if err != nil {
		return params
	}
	return out
}

// sameFile reports whether two paths name the same file (a domain symlink
// and the socket it points at do).
func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}
