package boundary

import (
	"context"
	"errors"
	"log/slog"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/tracing"
)

// invTrace is a traced invocation's spans: "chp.invoke" and the gate
// span open now.
type invTrace struct {
	tr   tracing.Tracer
	ctx  context.Context // the invoke span's: parent of the others
	span tracing.Span
	gate tracing.Span // nil: no gate open
}

// invokeIn is invokeEnv with the invocation's trace: the trace id of the
// span context ctx carries becomes correlation.trace_id when the envelope
// names none, and with a Tracer the invocation is a span ("chp.invoke")
// with a child per gate (invocation.gate) and per evidence append.
func (b *Boundary) invokeIn(ctx context.Context, inv *invocation, env *chp.InvocationEnvelope, caller *Caller) (*chp.InvocationResult, error) {
	tr := b.cfg.Tracer
	if tr == nil {
		if env != nil && env.Correlation.TraceID == nil {
			setTraceID(ctx, env)
		}
		return b.invokeEnv(ctx, inv, env, caller)
	}
	ctx, sp := tr.Start(ctx, "chp.invoke", tracing.KindInternal)
	if env != nil && env.Correlation.TraceID == nil {
		setTraceID(ctx, env)
	}
	t := &invTrace{tr: tr, ctx: ctx, span: sp}
	inv.trace = t
	res, err := b.invokeEnv(ctx, inv, env, caller)
	t.end(env, res, err)
	return res, err
}

// setTraceID records the trace ctx belongs to as env's trace_id: a W3C
// trace id, correlation only (a caller may name any trace).
func setTraceID(ctx context.Context, env *chp.InvocationEnvelope) {
	if sc, ok := tracing.FromContext(ctx); ok {
		id := sc.TraceID.String()
		env.Correlation.TraceID = &id
	}
}

// gate closes the span of the gate before (if any) and opens name's. The
// untraced path is a nil check, inlined.
func (inv *invocation) gate(name string) {
	if inv.trace != nil {
		inv.trace.startGate(name)
	}
}

// gateDone closes the open gate's span as the invocation finishes: d, a
// denial or skip, is the gate's verdict.
func (inv *invocation) gateDone(d *chp.DenialReason) {
	if inv.trace != nil {
		inv.trace.endGate(d)
	}
}

// appendSpan starts the span of an evidence append of n events; a span
// that does nothing when the invocation is not traced.
func (inv *invocation) appendSpan(n int) tracing.Span {
	if inv.trace == nil {
		return tracing.NoSpan
	}
	return inv.trace.appendSpan(n)
}

func (t *invTrace) startGate(name string) {
	if t.gate != nil {
		t.gate.End(nil)
	}
	_, t.gate = t.tr.Start(t.ctx, "chp.gate."+name, tracing.KindInternal)
}

func (t *invTrace) endGate(d *chp.DenialReason) {
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

func (t *invTrace) appendSpan(n int) tracing.Span {
	_, sp := t.tr.Start(t.ctx, "chp.evidence.append", tracing.KindInternal)
	sp.SetAttributes(slog.Int("chp.evidence.events", n))
	return sp
}

// end closes the invocation's spans with what it came to.
func (t *invTrace) end(env *chp.InvocationEnvelope, res *chp.InvocationResult, err error) {
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
