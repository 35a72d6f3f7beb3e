package boundary

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/internal/logbuf"
	"github.com/capmesh/capmesh/tracing"
)

// TestTraceIDInEvidenceAndPanicLog: the trace of the invocation's context
// is recorded as correlation.trace_id (unless the envelope names one), and
// the log line of a handler's panic carries it.
func TestTraceIDInEvidenceAndPanicLog(t *testing.T) {
	var logs logbuf.Buffer
	b, err := New(Config{HostID: "trace-host", Logger: slog.New(tracing.LogHandler(slog.NewJSONHandler(&logs, nil)))})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Register(Capability{Descriptor: chp.CapabilityDescriptor{ID: "x.boom", Version: "1.0.0", Description: "panics"},
		Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) { panic("boom") }}); err != nil {
		t.Fatal(err)
	}
	sc, err := tracing.ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if err != nil {
		t.Fatal(err)
	}
	ctx := tracing.ContextWith(context.Background(), sc)
	own := "caller-trace"
	for _, tc := range []struct {
		corr  string
		trace *string
		want  string
	}{{"c1", nil, "4bf92f3577b34da6a3ce929d0e0e4736"}, {"c2", &own, own}} {
		res, err := b.Invoke(ctx, &chp.InvocationEnvelope{CapabilityID: "x.boom", Correlation: chp.CorrelationContext{CorrelationID: tc.corr, TraceID: tc.trace}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Correlation.TraceID == nil || *res.Correlation.TraceID != tc.want {
			t.Errorf("%s: result trace_id %v, want %s", tc.corr, res.Correlation.TraceID, tc.want)
		}
		rep, err := b.Replay(context.Background(), chp.ReplayQuery{CorrelationID: tc.corr})
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range rep.Events {
			if !strings.Contains(string(raw), `"trace_id":"`+tc.want+`"`) {
				t.Errorf("%s: event %s lacks trace_id %s", tc.corr, raw, tc.want)
			}
		}
	}
	// Without a trace context, none is recorded.
	res, err := b.Invoke(context.Background(), &chp.InvocationEnvelope{CapabilityID: "x.boom", Correlation: chp.CorrelationContext{CorrelationID: "c3"}})
	if err != nil || res.Correlation.TraceID != nil {
		t.Fatalf("untraced: %v, %v", res.Correlation.TraceID, err)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d log lines: %s", len(lines), logs.String())
	}
	for i, l := range lines[:2] {
		if !strings.Contains(l, `"msg":"capability handler panicked"`) || !strings.Contains(l, `"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`) {
			t.Errorf("panic log line %d lacks the trace id: %s", i, l)
		}
	}
	if strings.Contains(lines[2], "trace_id") {
		t.Errorf("the untraced call's panic line has a trace id: %s", lines[2])
	}
}
