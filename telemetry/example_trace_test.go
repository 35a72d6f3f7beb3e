package telemetry_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/telemetry"
)

// A host program opts in to tracing by handing a Tracer to its Config:
// here an in-memory exporter's, where a program would use
// telemetry.TracingFromEnv (OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is
// set). The caller's trace continues through the host's dispatch, the CHP
// gates and the evidence append.
func Example_tracing() {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	cfg := &host.Config{Ephemeral: true, NoAnnounce: true, Tracer: telemetry.NewTracer(tp), Logger: slog.New(slog.DiscardHandler)}
	h, err := host.New(host.Info{Name: "traced", Version: "1.0.0"}, cfg)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	if err := host.Register(h, "kv.get", func(_ context.Context, in struct{ Key string }) (string, error) { return in.Key, nil }); err != nil {
		panic(err)
	}
	ctx := context.Background()
	c := h.LocalClient(ctx)
	defer c.Close()
	params := map[string]any{"Key": "a", "_meta": map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	if err := c.Call(ctx, "kv.get", params, nil); err != nil {
		panic(err)
	}
	var names []string
	for _, s := range exp.GetSpans() {
		if s.SpanContext.TraceID().String() == "4bf92f3577b34da6a3ce929d0e0e4736" {
			names = append(names, s.Name)
		}
	}
	slices.Sort(names)
	fmt.Println(slices.Compact(names))
	// Output:
	// [capmesh.host.dispatch chp.evidence.append chp.gate.autonomy chp.gate.capability_id chp.gate.enabled chp.gate.execute chp.gate.input_schema chp.gate.invariants chp.gate.key_scope chp.gate.mandate chp.gate.mode chp.gate.output_schema chp.gate.policy chp.gate.replay chp.gate.resolution chp.gate.safety chp.invoke]
}
