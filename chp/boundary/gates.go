package boundary

import (
	"context"
	"fmt"

	"github.com/capmesh/capmesh/chp"
)

// A gate is one step of the invocation pipeline (chp-invocation-pipeline.md
// §2). It returns nil, nil to pass the invocation on to the next gate; a
// result (a denial or skip, already recorded as evidence) or an error (the
// evidence could not be recorded) ends the pipeline there. A gate that lets
// the invocation pass may still emit events (an audit, a warning, the
// safety verdict).
type gate func(b *Boundary, ctx context.Context, inv *invocation) (*chp.InvocationResult, error)

// gates are gates 1–10, in order, by name; execute is gates 11 and 12.
// Method expressions, so running them allocates nothing.
var gates = [...]struct {
	name string
	run  gate
}{
	{"capability_id", (*Boundary).gateCapabilityID},
	{"resolution", (*Boundary).gateResolve},
	{"enabled", (*Boundary).gateEnabled},
	{"mode", (*Boundary).gateMode},
	{"mandate", (*Boundary).gateMandate},
	{"policy", (*Boundary).gatePolicy},
	{"invariants", (*Boundary).gateInvariants},
	{"autonomy", (*Boundary).gateAutonomy},
	{"input_schema", (*Boundary).gateInputSchema},
	{"safety", (*Boundary).gateSafety},
}

// gateCapabilityID is gate 1: a non-empty capability id.
func (b *Boundary) gateCapabilityID(ctx context.Context, inv *invocation) (*chp.InvocationResult, error) {
	if !isBlank(inv.env.CapabilityID) {
		return nil, nil
	}
	return b.finishDenied(ctx, inv, b.denial(chp.CodeCapabilityNotFound, "capability_id is missing or empty",
		map[string]any{"hint": "set the envelope's capability_id"}))
}

// gateResolve is gate 2: resolution of the id (and version or range) to a
// registered capability, which every later gate reads from inv.cap.
func (b *Boundary) gateResolve(ctx context.Context, inv *invocation) (*chp.InvocationResult, error) {
	env := inv.env
	r, deny := b.resolve(env.CapabilityID, env.Version, env.RequestedCapabilityVersion)
	if deny != nil {
		return b.finishDenied(ctx, inv, deny)
	}
	inv.cap = r
	inv.version = &r.desc.Version // immutable once registered
	return nil, nil
}

// gateEnabled is gate 3: a disabled capability is skipped, not denied.
func (b *Boundary) gateEnabled(ctx context.Context, inv *invocation) (*chp.InvocationResult, error) {
	if inv.cap.enabled.Load() {
		return nil, nil
	}
	reason := b.denial(chp.CodeCapabilityDisabled, "Capability disabled: "+inv.cap.uri, nil)
	b.emit(inv, evt{typ: chp.EventSkipped, outcome: chp.OutcomeSkipped, payload: map[string]any{"reason": chp.CodeCapabilityDisabled}, denial: reason})
	return b.finish(ctx, inv, chp.OutcomeSkipped, nil, reason, nil)
}

// gateMode is gate 4: the requested mode is one the capability supports.
func (b *Boundary) gateMode(ctx context.Context, inv *invocation) (*chp.InvocationResult, error) {
	d, mode := &inv.cap.desc, inv.env.Mode
	if contains(d.Modes, mode) {
		return nil, nil
	}
	return b.finishDenied(ctx, inv, b.denial(chp.CodeUnsupportedMode,
		fmt.Sprintf("Capability %s does not support mode %s", inv.cap.uri, mode),
		map[string]any{"requested": mode, "supported": toAny(d.Modes)}))
}

// gateMandate is gate 5: a mandate, when the envelope carries one, is
// verified (mandates.go); a valid one rebinds the subject.
func (b *Boundary) gateMandate(ctx context.Context, inv *invocation) (*chp.InvocationResult, error) {
	if isNull(inv.env.Mandate) {
		return nil, nil
	}
	deny, err := b.mandateGate(inv)
	if err != nil || deny == nil {
		return nil, err
	}
	return b.finishDenied(ctx, inv, deny)
}

// gatePolicy is gate 6: the Config's policy, if any. An audit-only policy
// records what it would have denied and lets the invocation pass.
func (b *Boundary) gatePolicy(ctx context.Context, inv *invocation) (*chp.InvocationResult, error) {
	p := b.cfg.Policy
	if p == nil {
		return nil, nil
	}
	rule, why := p.Decide(&inv.cap.desc, inv.env.Payload)
	if rule == "" {
		return nil, nil
	}
	record := map[string]any{"decision": "deny", "matched_rule": rule, "policy_version": nilIfEmpty(p.Version),
		"explanation": why, "required_next_action": nil}
	if !p.AuditOnly {
		return b.finishDenied(ctx, inv, b.denial(chp.CodePolicyBlocked, why, record))
	}
	record["audit_only"] = true
	b.emit(inv, evt{typ: "io.github.capmesh.policy_audited", payload: record})
	return nil, nil
}

// gateInvariants is gate 7: the host-enforced invariants. A failed one
// denies, or — unless its failure_behavior is "deny" — records a warning.
func (b *Boundary) gateInvariants(ctx context.Context, inv *invocation) (*chp.InvocationResult, error) {
	for _, chk := range inv.cap.checkers {
		ok, msg, err := chk.Check(ctx, inv.env)
		if err != nil {
			ok, msg = false, "invariant could not be evaluated: "+err.Error()
		}
		if ok {
			continue
		}
		if chk.Desc.FailureBehavior != "deny" {
			b.emit(inv, evt{typ: "io.github.capmesh.invariant_warning", uri: inv.cap.uri, payload: map[string]any{
				"invariant_id": chk.Desc.ID, "message": msg}})
			continue
		}
		id := chk.Desc.ID
		dn := b.denial(chp.CodeInvariantFailed, msg, map[string]any{"kind": chk.Desc.Kind})
		dn.InvariantID = &id
		return b.finishDenied(ctx, inv, dn)
	}
	return nil, nil
}

// gateAutonomy is gate 8: the autonomy profile's budget and tier. The
// count and the execution_started append must be atomic per correlation,
// or two concurrent calls both pass the budget: the gate locks the
// correlation's stripe into inv.autonomy, which the pipeline unlocks when
// it ends.
func (b *Boundary) gateAutonomy(ctx context.Context, inv *invocation) (*chp.InvocationResult, error) {
	a := inv.cap.desc.Autonomy
	if a == nil {
		return nil, nil
	}
	inv.autonomy = b.stripe(inv.env.Correlation.CorrelationID)
	inv.autonomy.Lock()
	corr := inv.env.Correlation.CorrelationID
	started, err := b.store.Count(ctx, corr, chp.EventStarted)
	if err != nil {
		return nil, fmt.Errorf("boundary: counting autonomy budget: %w", err)
	}
	started += countPending(inv.pending, chp.EventStarted)
	if over, details := overBudget(a, started); over != "" {
		payload := make(map[string]any, len(details))
		for k, v := range details {
			payload[k] = v
		}
		b.emit(inv, evt{typ: chp.EventBudgetExceeded, outcome: chp.OutcomeDenied, uri: inv.cap.uri, payload: payload})
		return b.finishDenied(ctx, inv, b.denial(chp.CodeBudgetExceeded,
			fmt.Sprintf("%s reached for correlation %s (actions_taken=%d)", over, corr, started), details))
	}
	if a.Tier == "approval_required" {
		b.emit(inv, evt{typ: chp.EventApprovalRequested, outcome: chp.OutcomeDenied, uri: inv.cap.uri, payload: map[string]any{
			"tier": a.Tier}})
		return b.finishDenied(ctx, inv, b.denial(chp.CodeApprovalRequired,
			fmt.Sprintf("Capability %s requires explicit approval", inv.cap.uri), map[string]any{"tier": a.Tier}))
	}
	return nil, nil
}

// overBudget checks started executions against a's limits: it returns
// the limit reached ("" if none) and the denial's details.
func overBudget(a *chp.AutonomyProfile, started int) (string, map[string]any) {
	over := ""
	details := map[string]any{"action_limit": nil, "actions_taken": started, "rollback_policy": orDefault(a.RollbackPolicy, "none")}
	if a.ActionLimit != nil {
		details["action_limit"] = *a.ActionLimit
		if int64(started) >= *a.ActionLimit {
			over = "action_limit"
		}
	}
	if over == "" && a.SpendLimit != nil {
		units := a.SpendUnits
		if units == 0 {
			units = 1
		}
		if float64(started)*units >= *a.SpendLimit {
			over = "spend_limit"
			details["spend_limit"] = fmt.Sprintf("%.3f", *a.SpendLimit)
			details["spend"] = fmt.Sprintf("%.3f", float64(started)*units)
		}
	}
	if over != "" {
		details["limit_type"] = over
	}
	return over, details
}

// unlockAutonomy releases the stripe gateAutonomy locked, if any.
func (inv *invocation) unlockAutonomy() {
	if mu := inv.autonomy; mu != nil {
		inv.autonomy = nil
		mu.Unlock()
	}
}

// gateInputSchema is gate 9: the payload against the input schema.
func (b *Boundary) gateInputSchema(ctx context.Context, inv *invocation) (*chp.InvocationResult, error) {
	r := inv.cap
	if r.input == nil {
		return nil, nil
	}
	path, msg, ok := r.input.Validate(inv.env.Payload)
	if ok {
		return nil, nil
	}
	return b.finishDenied(ctx, inv, b.denial(chp.CodeInputSchemaValidationFailed,
		"payload fails the input schema "+msg,
		map[string]any{"schema_id": r.uri + "#input_schema", "path": path}))
}

// gateSafety is gate 10: the Config's safety assessor, if any, whose
// verdict is recorded either way.
func (b *Boundary) gateSafety(ctx context.Context, inv *invocation) (*chp.InvocationResult, error) {
	s := b.cfg.Safety
	if s == nil {
		return nil, nil
	}
	uri := inv.cap.uri
	verdict := s.Assess(ctx, &inv.cap.desc, inv.env)
	b.emit(inv, evt{typ: chp.EventSafetyStarted, uri: uri})
	b.emit(inv, evt{typ: chp.EventSafetyCompleted, uri: uri, payload: map[string]any{
		"approved": verdict.Approved, "level": verdict.Level, "score": verdict.Score}})
	if !verdict.Approved {
		ev := toAny(verdict.Evaluated)
		b.emit(inv, evt{typ: chp.EventSafetyTriggered, uri: uri, payload: map[string]any{
			"guardrails_evaluated": ev, "reason": verdict.Reason}})
		b.emit(inv, evt{typ: chp.EventSafetyBlocked, outcome: chp.OutcomeDenied, uri: uri, payload: map[string]any{"reason": verdict.Reason}})
		return b.finishDenied(ctx, inv, b.denial(chp.CodeSafetyBlocked, verdict.Reason,
			map[string]any{"level": verdict.Level, "score": verdict.Score}))
	}
	b.emit(inv, evt{typ: chp.EventSafetyApproved, uri: uri, payload: map[string]any{
		"level": verdict.Level, "recommendation": "allow"}})
	return nil, nil
}
