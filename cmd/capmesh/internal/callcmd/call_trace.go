package callcmd

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"time"

	"github.com/capmesh/capmesh/cmd/capmesh/internal/cli"
	"github.com/capmesh/capmesh/telemetry"
	"github.com/capmesh/capmesh/tracing"
)

// traceCall gives a `capmesh call` its trace context, carried to the host
// in params._meta.traceparent: the parent named by $TRACEPARENT (the
// OpenTelemetry convention for passing a trace to a child process), and —
// when OTEL_EXPORTER_OTLP_ENDPOINT is set — a client span of its own,
// exported before the command exits (end). Array params cannot carry it
// and go unchanged; so do all params when there is no trace context.
func traceCall(ctx context.Context, a cli.Env, method string, params json.RawMessage) (json.RawMessage, func(error)) {
	noop := func(error) {}
	if s := os.Getenv("TRACEPARENT"); s != "" {
		sc, err := tracing.ParseTraceparent(s)
		if err != nil {
			a.Log().Warn("ignoring $TRACEPARENT", "err", err)
		} else {
			ctx = tracing.ContextWith(ctx, sc)
		}
	}
	t, err := telemetry.TracingFromEnv(ctx, "capmesh")
	if err != nil {
		a.Log().Warn("tracing off", "err", err)
	}
	if t == nil {
		if sc, ok := tracing.FromContext(ctx); ok {
			if p, err := tracing.WithMeta(params, sc); err == nil {
				params = p
			}
		}
		return params, noop
	}
	_, sp := t.Tracer.Start(ctx, "capmesh.call", tracing.KindClient)
	sp.SetAttributes(slog.String("rpc.system", "jsonrpc"), slog.String("rpc.method", method))
	if p, err := tracing.WithMeta(params, sp.SpanContext()); err == nil {
		params = p
	}
	return params, func(callErr error) {
		sp.End(callErr)
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := t.Shutdown(sctx); err != nil {
			a.Log().Warn("tracing: exporting the call's span", "err", err)
		}
	}
}
