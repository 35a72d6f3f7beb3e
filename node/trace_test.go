package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/host"
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
	var logs syncBuffer
	log := slog.New(tracing.LogHandler(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))

	n, err := node.Start(ctx, node.Config{Memory: true, Version: "1.0.0", Tracer: tr, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop(context.Background())
	sock := "unix://" + n.Addr("unix")

	kv, err := host.New(host.Info{Name: "kvtrace", Version: "1.0.0", Domain: "kvtrace"}, &host.Config{Ephemeral: true, Node: sock, Tracer: tr, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Register(kv, "kvtrace.get", func(ctx context.Context, in struct {
		Key string `json:"key"`
	}) (string, error) {
		log.InfoContext(ctx, "kvtrace.get served", "key", in.Key)
		return "v:" + in.Key, nil
	}); err != nil {
		t.Fatal(err)
	}
	hctx, hcancel := context.WithCancel(ctx)
	hdone := make(chan error, 1)
	go func() { hdone <- kv.Serve(hctx) }()
	defer func() { hcancel(); <-hdone }()
	for len(n.Registry().Find("kvtrace.get", registry.FindOptions{})) == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the host never appeared in the registry")
		case <-time.After(20 * time.Millisecond):
		}
	}

	// The client: another host's Provider, which calls through the node.
	consumer, err := host.New(host.Info{Name: "consumer", Version: "1.0.0"}, &host.Config{Ephemeral: true, NoAnnounce: true, Node: sock, Tracer: tr, Logger: log})
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
	rep, err := kv.Boundary().Replay(ctx, chp.ReplayQuery{CorrelationID: "corr-one-trace"})
	if err != nil || rep.EventCount == 0 {
		t.Fatalf("replay: %+v, %v", rep, err)
	}
	for _, raw := range rep.Events {
		var ev chp.EvidenceEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Correlation.TraceID == nil || *ev.Correlation.TraceID != trace.String() {
			t.Errorf("event %s: correlation.trace_id %v, want %s", ev.EventType, ev.Correlation.TraceID, trace)
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
