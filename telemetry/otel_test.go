package telemetry_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/capmesh/capmesh/telemetry"
	"github.com/capmesh/capmesh/tracing"
)

// TestTracerParents: a remote traceparent in ctx is the parent of the
// first span; spans started in it are its children; the capmesh span
// context in ctx follows; attributes and errors reach the span.
func TestTracerParents(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	tr := telemetry.NewTracer(tp)

	remote, err := tracing.ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if err != nil {
		t.Fatal(err)
	}
	ctx := tracing.ContextWith(context.Background(), remote)
	ctx1, s1 := tr.Start(ctx, "server", tracing.KindServer)
	s1.SetAttributes(slog.String("rpc.method", "kv.get"), slog.Int("hops", 2), slog.Bool("ok", true), slog.Duration("d", time.Millisecond))
	sc1, ok := tracing.FromContext(ctx1)
	if !ok || sc1 != s1.SpanContext() || sc1.Remote || sc1.TraceID != remote.TraceID {
		t.Fatalf("context after Start: %+v, %v; span %+v", sc1, ok, s1.SpanContext())
	}
	// A span the program starts with OpenTelemetry itself inside ours is
	// the parent of the next capmesh span.
	ctx2, own := tp.Tracer("program").Start(ctx1, "program")
	_, s3 := tr.Start(ctx2, "client", tracing.KindClient)
	s3.End(errors.New("boom"))
	own.End()
	s1.End(nil)

	spans := exp.GetSpans()
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	srv, cli := byName["server"], byName["client"]
	if srv.Parent.SpanID() != oteltrace.SpanID(remote.SpanID) || !srv.Parent.IsRemote() || srv.SpanKind != oteltrace.SpanKindServer {
		t.Errorf("server span: parent %v remote %v kind %v", srv.Parent.SpanID(), srv.Parent.IsRemote(), srv.SpanKind)
	}
	if cli.Parent.SpanID() != own.SpanContext().SpanID() || cli.SpanKind != oteltrace.SpanKindClient {
		t.Errorf("client span's parent %v, want the program's span %v", cli.Parent.SpanID(), own.SpanContext().SpanID())
	}
	if cli.Status.Code != codes.Error || cli.Status.Description != "boom" {
		t.Errorf("client span status %+v", cli.Status)
	}
	attrs := map[string]string{}
	for _, kv := range srv.Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	want := map[string]string{"rpc.method": "kv.get", "hops": "2", "ok": "true", "d": "1000000"}
	for k, v := range want {
		if attrs[k] != v {
			t.Errorf("attribute %s = %q, want %q (all: %v)", k, attrs[k], v, attrs)
		}
	}
	for _, s := range spans {
		if s.SpanContext.TraceID() != oteltrace.TraceID(remote.TraceID) {
			t.Errorf("span %s in trace %v, want the caller's", s.Name, s.SpanContext.TraceID())
		}
	}
}

// TestTracingFromEnv: without an OTLP endpoint there is no tracing; with
// one, spans are exported over OTLP/HTTP to it (a real listener).
func TestTracingFromEnv(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	if tr, err := telemetry.TracingFromEnv(context.Background(), "capmesh"); tr != nil || err != nil {
		t.Fatalf("without an endpoint: %v, %v", tr, err)
	}
	got := make(chan string, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if len(body) > 0 {
			got <- r.Method + " " + r.URL.Path + " " + r.Header.Get("Content-Type")
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	for _, env := range []struct{ k, v string }{{"OTEL_SDK_DISABLED", "true"}, {"OTEL_TRACES_EXPORTER", "none"}} {
		t.Setenv(env.k, env.v)
		if tr, err := telemetry.TracingFromEnv(context.Background(), "capmesh"); tr != nil || err != nil {
			t.Fatalf("%s=%s: %v, %v", env.k, env.v, tr, err)
		}
		t.Setenv(env.k, "")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	if _, err := telemetry.TracingFromEnv(context.Background(), "capmesh"); err == nil {
		t.Fatal("OTEL_EXPORTER_OTLP_PROTOCOL=grpc accepted")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	tr, err := telemetry.TracingFromEnv(context.Background(), "capmesh-test")
	if err != nil || tr == nil {
		t.Fatalf("with an endpoint: %v, %v", tr, err)
	}
	_, s := tr.Tracer.Start(context.Background(), "exported", tracing.KindInternal)
	s.End(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case req := <-got:
		if req != "POST /v1/traces application/x-protobuf" {
			t.Errorf("export request %q", req)
		}
	default:
		t.Fatal("nothing was exported")
	}
}
