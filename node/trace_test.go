package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/node"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/telemetry"
	"github.com/capmesh/capmesh/tracing"
)

// syncBuffer is a log sink shared by the node's and the host's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// mesh is a node and a host registered with it (kvtrace.get), logging
// JSON through one logger into logs.
type mesh struct {
	n    *node.Node
	kv   *host.Host
	log  *slog.Logger
	logs *syncBuffer
	sock string // the node's, as an endpoint
}

// startMesh starts a node and a host, both traced by tr (nil: untraced),
// and waits until the host is registered. Both stop with the test.
func startMesh(t *testing.T, ctx context.Context, tr tracing.Tracer) *mesh {
	t.Helper()
	m := &mesh{logs: &syncBuffer{}}
	m.log = slog.New(tracing.LogHandler(slog.NewJSONHandler(m.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	n, err := node.Start(ctx, node.Config{Memory: true, Version: "1.0.0", Tracer: tr, Logger: m.log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Stop(context.Background()) })
	m.n, m.sock = n, "unix://"+n.Addr("unix")
	kv, err := host.New(host.Info{Name: "kvtrace", Version: "1.0.0", Domain: "kvtrace"}, &host.Config{Ephemeral: true, Node: m.sock, Tracer: tr, Logger: m.log})
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Register(kv, "kvtrace.get", func(ctx context.Context, in struct {
		Key string `json:"key"`
	}) (string, error) {
		m.log.InfoContext(ctx, "kvtrace.get served", "key", in.Key)
		return "v:" + in.Key, nil
	}); err != nil {
		t.Fatal(err)
	}
	hctx, hcancel := context.WithCancel(ctx)
	hdone := make(chan error, 1)
	go func() { hdone <- kv.Serve(hctx) }()
	t.Cleanup(func() { hcancel(); <-hdone })
	m.kv = kv
	for len(n.Registry().Find("kvtrace.get", registry.FindOptions{})) == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the host never appeared in the registry")
		case <-time.After(20 * time.Millisecond):
		}
	}
	return m
}

// traceIDs are the correlation.trace_id of every evidence event of corr
// on h ("<nil>" for none).
func traceIDs(t *testing.T, ctx context.Context, h *host.Host, corr string) []string {
	t.Helper()
	rep, err := h.Boundary().Replay(ctx, chp.ReplayQuery{CorrelationID: corr})
	if err != nil || rep.EventCount == 0 {
		t.Fatalf("replay %s: %+v, %v", corr, rep, err)
	}
	var out []string
	for _, raw := range rep.Events {
		var ev chp.EvidenceEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		id := "<nil>"
		if ev.Correlation.TraceID != nil {
			id = *ev.Correlation.TraceID
		}
		out = append(out, id)
	}
	return out
}

// TestOneTraceAcrossTheMesh: a call made by a host's Provider client,
// routed by a node to another host over real Unix sockets, is one trace —
// the client's span, the node's route span, the host's dispatch span, the
// boundary's invocation span with a span per CHP gate and per evidence
// append — whose trace id is the correlation's trace_id in every evidence
// event, and on the log lines of the call (JSON, through one logger).
func TestOneTraceAcrossTheMesh(t *testing.T) {
	env(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	tr := telemetry.NewTracer(tp)
	m := startMesh(t, ctx, tr)
	kv, logs, sock := m.kv, m.logs, m.sock

	// The client: another host's Provider, which calls through the node.
	consumer, err := host.New(host.Info{Name: "consumer", Version: "1.0.0"}, &host.Config{Ephemeral: true, NoAnnounce: true, Node: sock, Tracer: tr, Logger: m.log})
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	c, err := consumer.Provider(ctx, "kvtrace.get")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got string
	params := map[string]any{"key": "a", "_meta": map[string]any{"correlation_id": "corr-one-trace"}}
	if err := c.Call(ctx, "kvtrace.get", params, &got); err != nil || got != "v:a" {
		t.Fatalf("call: %q, %v", got, err)
	}

	spans := exp.GetSpans()
	byName := map[string][]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	one := func(name string) tracetest.SpanStub {
		t.Helper()
		if len(byName[name]) != 1 {
			var names []string
			for _, s := range spans {
				names = append(names, s.Name)
			}
			t.Fatalf("%d spans named %s; all: %v", len(byName[name]), name, names)
		}
		return byName[name][0]
	}
	call, route, dispatch, invoke := one("capmesh.call"), one("capmesh.route"), one("capmesh.host.dispatch"), one("chp.invoke")
	trace := call.SpanContext.TraceID()
	for _, s := range spans {
		if s.SpanContext.TraceID() != trace {
			t.Errorf("span %s is in trace %s, not the call's %s", s.Name, s.SpanContext.TraceID(), trace)
		}
	}
	if call.Parent.IsValid() || call.SpanKind != oteltrace.SpanKindClient {
		t.Errorf("the client span has parent %v, kind %v: want a root client span", call.Parent, call.SpanKind)
	}
	parentOf := func(child, parent tracetest.SpanStub) {
		t.Helper()
		if child.Parent.SpanID() != parent.SpanContext.SpanID() {
			t.Errorf("%s's parent is %s, want %s (%s)", child.Name, child.Parent.SpanID(), parent.Name, parent.SpanContext.SpanID())
		}
	}
	parentOf(route, call)
	parentOf(dispatch, route)
	parentOf(invoke, dispatch)
	for _, g := range []string{"key_scope", "replay", "capability_id", "resolution", "enabled", "mode", "mandate", "policy", "invariants", "autonomy", "input_schema", "safety", "execute", "output_schema"} {
		parentOf(one("chp.gate."+g), invoke)
	}
	if len(byName["chp.evidence.append"]) == 0 {
		t.Fatal("no evidence append span")
	}
	for _, s := range byName["chp.evidence.append"] {
		parentOf(s, invoke)
	}

	// The evidence names the trace: correlation.trace_id on every event.
	for _, id := range traceIDs(t, ctx, kv, "corr-one-trace") {
		if id != trace.String() {
			t.Errorf("an event's correlation.trace_id is %s, want %s", id, trace)
		}
	}

	// The log lines of the call carry its trace id: the router's and the
	// capability's own.
	want := map[string]bool{"registry: routed a call": false, "kvtrace.get served": false}
	for _, l := range logs.lines() {
		msg, _ := l["msg"].(string)
		if _, ok := want[msg]; ok {
			want[msg] = true
			if l["trace_id"] != trace.String() {
				t.Errorf("log line %q: trace_id %v, want %s", msg, l["trace_id"], trace)
			}
		}
	}
	for msg, seen := range want {
		if !seen {
			t.Errorf("no log line %q", msg)
		}
	}
}

// TestTraceparentCrossesAnUntracedMesh: without a Tracer anywhere, the
// caller's _meta.traceparent still reaches the provider through the
// node's router untouched, and the provider records its trace id in the
// evidence and on the log lines of the call. An envelope's own trace_id
// wins over it; a malformed traceparent is dropped.
func TestTraceparentCrossesAnUntracedMesh(t *testing.T) {
	env(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := startMesh(t, ctx, nil)
	c, err := endpoint.Dial(ctx, m.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, tc := range []struct {
		corr string
		meta map[string]any
		want string
	}{
		{"corr-tp", map[string]any{"traceparent": tp}, "0af7651916cd43dd8448eb211c80319c"},
		{"corr-bad", map[string]any{"traceparent": "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01"}, "<nil>"},
		{"corr-own", map[string]any{"traceparent": tp, "correlation": map[string]any{"trace_id": "the-callers-own"}}, "the-callers-own"},
	} {
		tc.meta["correlation_id"] = tc.corr
		if cm, ok := tc.meta["correlation"].(map[string]any); ok {
			cm["correlation_id"] = tc.corr
		}
		var got string
		if err := c.Call(ctx, "kvtrace.get", map[string]any{"key": "a", "_meta": tc.meta}, &got); err != nil {
			t.Fatalf("%s: %v", tc.corr, err)
		}
		for _, id := range traceIDs(t, ctx, m.kv, tc.corr) {
			if id != tc.want {
				t.Errorf("%s: an event's correlation.trace_id is %s, want %s", tc.corr, id, tc.want)
			}
		}
	}
	served := 0
	for _, l := range m.logs.lines() {
		if l["msg"] == "kvtrace.get served" {
			served++
			if served == 1 && l["trace_id"] != "0af7651916cd43dd8448eb211c80319c" {
				t.Errorf("the first call's log line has trace_id %v", l["trace_id"])
			}
			if served == 2 && l["trace_id"] != nil {
				t.Errorf("the call with a malformed traceparent logged trace_id %v", l["trace_id"])
			}
		}
	}
	if served != 3 {
		t.Errorf("%d log lines of served calls, want 3", served)
	}
}

// TestNodeExportsOverOTLPFromTheEnvironment: with OTEL_EXPORTER_OTLP_ENDPOINT
// set and no Config.Tracer, the node traces its routing and exports the
// spans over OTLP/HTTP to that endpoint (a real listener) when it stops.
func TestNodeExportsOverOTLPFromTheEnvironment(t *testing.T) {
	env(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got := make(chan string, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- r.URL.Path + " " + strconv.Itoa(len(body))
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	n, err := node.Start(ctx, node.Config{Memory: true, Version: "1.0.0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := endpoint.Dial(ctx, "unix://"+n.Addr("unix"))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Call(ctx, "nosuch.operation", map[string]any{}, nil)
	c.Close()
	if code, _ := jsonrpc.ErrorCode(err); code != jsonrpc.MethodNotFound {
		t.Fatalf("routing nowhere: %v", err)
	}
	if err := n.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case req := <-got:
		if !strings.HasPrefix(req, "/v1/traces ") || strings.HasSuffix(req, " 0") {
			t.Errorf("export request %q", req)
		}
	case <-ctx.Done():
		t.Fatal("nothing exported")
	}
}
