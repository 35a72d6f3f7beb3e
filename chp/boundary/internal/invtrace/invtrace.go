// Package invtrace keeps the spans of one traced CHP invocation: a span
// "chp.invoke", one child per gate passed ("chp.gate.<name>", closed by
// the next gate or the invocation's end, with the denial code of a gate
// that denied) and one per evidence append ("chp.evidence.append").
//
// Data flow: boundary.invokeIn → Start (a Tracer configured) → the
// pipeline's gates call StartGate, its evidence appends AppendSpan, its
// finish EndGate → End with the invocation's result.
package invtrace

import (
	"context"
	"errors"
	"log/slog"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/tracing"
)

// Trace is a traced invocation's spans: "chp.invoke" and the gate span
// open now. It is used by one goroutine at a time.
type Trace struct {
	tr   tracing.Tracer
	ctx  context.Context // the invoke span's: parent of the others
	span tracing.Span
	gate tracing.Span // nil: no gate open
}

// Start opens the invocation's span with tr as a child of the span ctx
// carries, and returns the context carrying it.
func Start(ctx context.Context, tr tracing.Tracer) (context.Context, *Trace) {
	ctx, sp := tr.Start(ctx, "chp.invoke", tracing.KindInternal)
	return ctx, &Trace{tr: tr, ctx: ctx, span: sp}
}

// SetTraceID records the trace ctx belongs to as env's trace_id: a W3C
// trace id, correlation only (a caller may name any trace).
func SetTraceID(ctx context.Context, env *chp.InvocationEnvelope) {
	if sc, ok := tracing.FromContext(ctx); ok {
		id := sc.TraceID.String()
		env.Correlation.TraceID = &id
	}
}

// StartGate closes the span of the gate before (if any) and opens name's.
func (t *Trace) StartGate(name string) {
	if t.gate != nil {
		t.gate.End(nil)
	}
	_, t.gate = t.tr.Start(t.ctx, "chp.gate."+name, tracing.KindInternal)
}

// EndGate closes the open gate's span (if any) with d, a denial or skip
// (nil: none), as its verdict.
func (t *Trace) EndGate(d *chp.DenialReason) {
	if t.gate == nil {
		return
	}
	var err error
	if d != nil {
		t.gate.SetAttributes(slog.String("chp.denial_code", d.Code))
		err = errors.New(d.Code + ": " + d.Message)
	}
	t.gate.End(err)
	t.gate = nil
}

// AppendSpan starts the span of an evidence append of n events.
func (t *Trace) AppendSpan(n int) tracing.Span {
	_, sp := t.tr.Start(t.ctx, "chp.evidence.append", tracing.KindInternal)
	sp.SetAttributes(slog.Int("chp.evidence.events", n))
	return sp
}

// End closes the invocation's spans with what it came to.
func (t *Trace) End(env *chp.InvocationEnvelope, res *chp.InvocationResult, err error) {
	if t.gate != nil {
		t.gate.End(err)
	}
	if env != nil {
		t.span.SetAttributes(slog.String("chp.capability_id", env.CapabilityID),
			slog.String("chp.invocation_id", env.InvocationID),
			slog.String("chp.correlation_id", env.Correlation.CorrelationID))
	}
	if res != nil {
		t.span.SetAttributes(slog.String("chp.outcome", string(res.Outcome)), slog.Bool("chp.replayed", res.Replayed))
		if res.Denial != nil {
			t.span.SetAttributes(slog.String("chp.denial_code", res.Denial.Code))
		}
	}
	t.span.End(err)
}
