package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/capmesh/capmesh/tracing"
)

// InstrumentationName names capmesh's tracer (the instrumentation scope of
// its spans).
const InstrumentationName = "github.com/capmesh/capmesh"

// Tracer is the tracing.Tracer hook backed by an OpenTelemetry
// TracerProvider: hand it to host.Config.Tracer, boundary.Config.Tracer,
// registry.Config.Tracer or node.Config.Tracer. It is safe for concurrent
// use.
type Tracer struct{ t oteltrace.Tracer }

// NewTracer returns a Tracer whose spans tp makes (an SDK provider with
// an OTLP exporter — see TracingFromEnv — or, in tests, one with
// sdk/trace/tracetest's in-memory exporter).
func NewTracer(tp oteltrace.TracerProvider) *Tracer {
	return &Tracer{t: tp.Tracer(InstrumentationName)}
}

// Start implements tracing.Tracer. The parent is the remote caller's span
// context when ctx carries one not yet continued here (parsed from
// _meta.traceparent), else OpenTelemetry's current span in ctx — the
// last span capmesh started, or one the program started inside it.
func (t *Tracer) Start(ctx context.Context, name string, kind tracing.Kind) (context.Context, tracing.Span) {
	if sc, ok := tracing.FromContext(ctx); ok && sc.Remote {
		ctx = oteltrace.ContextWithRemoteSpanContext(ctx, toOTel(sc))
	}
	ctx, s := t.t.Start(ctx, name, oteltrace.WithSpanKind(otelKind(kind)))
	osc := s.SpanContext()
	sc := tracing.SpanContext{TraceID: tracing.TraceID(osc.TraceID()), SpanID: tracing.SpanID(osc.SpanID()), Flags: byte(osc.TraceFlags())}
	return tracing.ContextWith(ctx, sc), span{s: s, sc: sc}
}

func toOTel(sc tracing.SpanContext) oteltrace.SpanContext {
	return oteltrace.NewSpanContext(oteltrace.SpanContextConfig{
		TraceID:    oteltrace.TraceID(sc.TraceID),
		SpanID:     oteltrace.SpanID(sc.SpanID),
		TraceFlags: oteltrace.TraceFlags(sc.Flags),
		Remote:     sc.Remote,
	})
}

func otelKind(k tracing.Kind) oteltrace.SpanKind {
	switch k {
	case tracing.KindServer:
		return oteltrace.SpanKindServer
	case tracing.KindClient:
		return oteltrace.SpanKindClient
	}
	return oteltrace.SpanKindInternal
}

type span struct {
	s  oteltrace.Span
	sc tracing.SpanContext
}

func (s span) SpanContext() tracing.SpanContext { return s.sc }

func (s span) SetAttributes(attrs ...slog.Attr) {
	if !s.s.IsRecording() {
		return
	}
	kv := make([]attribute.KeyValue, 0, len(attrs))
	for _, a := range attrs {
		kv = append(kv, toAttribute(a))
	}
	s.s.SetAttributes(kv...)
}

func toAttribute(a slog.Attr) attribute.KeyValue {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return attribute.String(a.Key, v.String())
	case slog.KindInt64:
		return attribute.Int64(a.Key, v.Int64())
	case slog.KindUint64:
		return attribute.Int64(a.Key, int64(v.Uint64()))
	case slog.KindFloat64:
		return attribute.Float64(a.Key, v.Float64())
	case slog.KindBool:
		return attribute.Bool(a.Key, v.Bool())
	case slog.KindDuration:
		return attribute.Int64(a.Key, v.Duration().Nanoseconds())
	}
	return attribute.String(a.Key, v.String())
}

func (s span) End(err error) {
	if err != nil {
		s.s.SetStatus(codes.Error, err.Error())
	}
	s.s.End()
}

// Tracing is OpenTelemetry tracing exported over OTLP: the Tracer and
// the provider behind it, which Shutdown flushes.
type Tracing struct {
	// Tracer is the hook to hand to the Configs.
	Tracer *Tracer
	tp     *sdktrace.TracerProvider
}

// Shutdown exports the spans still buffered and stops the exporter; ctx
// bounds the wait.
func (t *Tracing) Shutdown(ctx context.Context) error { return t.tp.Shutdown(ctx) }

// TracingFromEnv returns tracing configured by the standard OpenTelemetry
// environment variables when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, and nil (tracing off: no span
// is made, nothing is exported) when neither is, or when OTEL_SDK_DISABLED
// is true or OTEL_TRACES_EXPORTER is none. Spans go in batches over
// OTLP/HTTP (protobuf; OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION,
// _CERTIFICATE … apply); OTEL_TRACES_SAMPLER chooses the sampler (default
// parentbased_always_on); service is service.name unless OTEL_SERVICE_NAME
// or OTEL_RESOURCE_ATTRIBUTES says otherwise.
func TracingFromEnv(ctx context.Context, service string) (*Tracing, error) {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, nil
	}
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	switch e := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))); e {
	case "", "otlp":
	case "none":
		return nil, nil
	default:
		return nil, fmt.Errorf("telemetry: OTEL_TRACES_EXPORTER=%q: capmesh exports traces over OTLP only (otlp or none)", e)
	}
	if p := strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")); p == "" {
		p = strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
		if p != "" && p != "http/protobuf" {
			return nil, fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_PROTOCOL=%q: capmesh exports OTLP over http/protobuf only", p)
		}
	} else if p != "http/protobuf" {
		return nil, fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=%q: capmesh exports OTLP over http/protobuf only", p)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("telemetry: trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracing{Tracer: NewTracer(tp), tp: tp}, nil
}
