package boundary

import (
	"context"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary/internal/invtrace"
	"github.com/capmesh/capmesh/tracing"
)

// invokeIn is invokeEnv with the invocation's trace: the trace id of the
// span context ctx carries becomes correlation.trace_id when the envelope
// names none, and with a Tracer the invocation is a span ("chp.invoke")
// with a child per gate (invocation.gate) and per evidence append
// (package invtrace keeps them).
func (b *Boundary) invokeIn(ctx context.Context, inv *invocation, env *chp.InvocationEnvelope, caller *Caller) (*chp.InvocationResult, error) {
	tr := b.cfg.Tracer
	if tr == nil {
		if env != nil && env.Correlation.TraceID == nil {
			invtrace.SetTraceID(ctx, env)
		}
		return b.invokeEnv(ctx, inv, env, caller)
	}
	ctx, t := invtrace.Start(ctx, tr)
	if env != nil && env.Correlation.TraceID == nil {
		invtrace.SetTraceID(ctx, env)
	}
	inv.trace = t
	res, err := b.invokeEnv(ctx, inv, env, caller)
	t.End(env, res, err)
	return res, err
}

// gate closes the span of the gate before (if any) and opens name's. The
// untraced path is a nil check, inlined.
func (inv *invocation) gate(name string) {
	if inv.trace != nil {
		inv.trace.StartGate(name)
	}
}

// gateDone closes the open gate's span as the invocation finishes: d, a
// denial or skip, is the gate's verdict.
func (inv *invocation) gateDone(d *chp.DenialReason) {
	if inv.trace != nil {
		inv.trace.EndGate(d)
	}
}

// appendSpan starts the span of an evidence append of n events; a span
// that does nothing when the invocation is not traced.
func (inv *invocation) appendSpan(n int) tracing.Span {
	if inv.trace == nil {
		return tracing.NoSpan
	}
	return inv.trace.AppendSpan(n)
}
