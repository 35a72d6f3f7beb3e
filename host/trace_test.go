package host

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/capmesh/capmesh/tracing"
)

// recordCaller keeps the params of the last call.
type recordCaller struct{ params any }

func (r *recordCaller) Call(_ context.Context, _ string, params, _ any) error {
	r.params = params
	return nil
}

func (r *recordCaller) Notify(_ context.Context, _ string, params any) error {
	r.params = params
	return nil
}

func (r *recordCaller) Close() error { return nil }

// TestProviderCarriesTheTraceContext: without a Tracer, a call through
// Provider's connection carries the trace context of its ctx (inside a
// handler, the invocation's) in params._meta.traceparent, keeping the
// other members; params that cannot carry it, and calls without a trace
// context, go unchanged.
func TestProviderCarriesTheTraceContext(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc, err := tracing.ParseTraceparent(tp)
	if err != nil {
		t.Fatal(err)
	}
	traced := tracing.ContextWith(context.Background(), sc)
	for _, tc := range []struct {
		ctx    context.Context
		params any
		want   string
	}{
		{traced, map[string]any{"key": "a", "_meta": map[string]any{"correlation_id": "c"}}, `{"_meta":{"correlation_id":"c","traceparent":"` + tp + `"},"key":"a"}`},
		{traced, json.RawMessage(`{"key":"a"}`), `{"_meta":{"traceparent":"` + tp + `"},"key":"a"}`},
		{traced, nil, `{"_meta":{"traceparent":"` + tp + `"}}`},
		{traced, []any{1, 2}, `[1,2]`},
		{context.Background(), map[string]any{"key": "a"}, `{"key":"a"}`},
	} {
		for _, notify := range []bool{false, true} {
			rec := &recordCaller{}
			c := &tracedCaller{Caller: rec}
			if notify {
				_ = c.Notify(tc.ctx, "kv.get", tc.params)
			} else {
				_ = c.Call(tc.ctx, "kv.get", tc.params, nil)
			}
			got, err := json.Marshal(rec.params)
			if err != nil || string(got) != tc.want {
				t.Errorf("params %v (notify %v): sent %s, %v; want %s", tc.params, notify, got, err, tc.want)
			}
		}
	}
}
