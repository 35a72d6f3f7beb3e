package chp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/capmesh/capmesh/evidence"
)

// Caller is an authenticated caller, bound by a transport (an X-CHP-Key
// name, a Unix-socket peer). A Caller in the context replaces the subject
// the envelope asserts and, when Scope is non-nil, limits which capabilities
// it may invoke (exact ids or trailing-* prefixes).
type Caller struct {
	ID    string
	Type  string // "api_key", "unix_peer", …
	Scope []string

	// subj and info cache the subject, and its rendering in evidence, of
	// a Caller the package made and never changes (a Unix peer's).
	subj json.RawMessage
	info *subjectInfo
}

type callerKey struct{}
type invocationKey struct{}

// WithCaller returns ctx carrying an authenticated caller.
func WithCaller(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// subject is the verified subject object a bound caller stands for.
func (c *Caller) subject() json.RawMessage {
	if c.subj != nil {
		return c.subj
	}
	b := make([]byte, 0, 48+len(c.ID)+len(c.Type))
	b = append(b, `{"id":`...)
	b = appendStableString(b, c.ID)
	b = append(b, `,"type":`...)
	b = appendStableString(b, c.Type)
	return append(b, `,"verified":true}`...)
}

// CallerFromContext returns the caller bound by WithCaller.
func CallerFromContext(ctx context.Context) (*Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(*Caller)
	return c, ok && c != nil
}

// InvocationFromContext returns the (normalized) envelope of the invocation
// a handler is executing.
func InvocationFromContext(ctx context.Context) (*InvocationEnvelope, bool) {
	e, ok := ctx.Value(invocationKey{}).(*InvocationEnvelope)
	return e, ok
}

// invocation is the pipeline state of one call.
type invocation struct {
	env     *InvocationEnvelope
	hdr     invHeader
	cap     *registered // nil before resolution
	version *string
	pending []evidence.Pending
	ids     []string
	started *string
	last    uint64
	// recorded is the encoded result written to a durable store; the
	// replay cache keeps it instead of a copy of the result.
	recorded []byte

	// startedAt backs started, rendered with completed_at from startedTS.
	startedAt string
	startedTS time.Time
	// spare holds event ids drawn ahead, taken from the end.
	spare  [2]string
	nspare int
	// lastTS is the timestamp of the latest event: execution_started's is
	// started_at, the final event's completed_at.
	lastTS time.Time
	// ctx is the handler's context: the caller's, carrying the envelope
	// and the bound caller without allocating a context of its own
	// (ctxBuf, or — for a pooled invocation, whose handler may keep its
	// context — the direct call's own).
	ctx    *invCtx
	ctxBuf invCtx

	// Backing arrays for the common case (two events), so that an
	// invocation allocates neither the slices nor the events' sealers.
	pendArr [2]evidence.Pending
	idArr   [2]string
	sealArr [2]sealer
	sealers int    // sealArr entries in use
	st      *stage // where pending events are staged (nil until the first)

	// A direct call (DirectHandler) keeps its result in its invocation,
	// which it recycles once the result is answered (see directCall).
	direct bool
	resBuf InvocationResult
}

// directCall is what a direct call allocates for itself: the envelope and
// the handler's context, which a handler may keep beyond its return, so
// they are never part of a recycled invocation.
type directCall struct {
	env InvocationEnvelope
	ctx invCtx
}

// invocationPool recycles the invocations of direct calls answered with
// success: at a kilobyte each they were most of what a call allocated.
var invocationPool = sync.Pool{New: func() any { return new(invocation) }}

// recycle returns a direct call's invocation to the pool once its result
// has been turned into the answer (ResultToRPC copies what it answers:
// the handler's data, or the whole result encoded as an error's data).
// Nothing refers to it any more — not the result (inv.resBuf, whose
// evidence ids and started_at point into inv), not the handler (its
// envelope and context are the call's own), not the store (which copied
// every event), not the replay cache (which copied the result).
func (inv *invocation) recycle() {
	*inv = invocation{}
	invocationPool.Put(inv)
}

// invCtx is the context a handler runs with: the invocation's, answering
// InvocationFromContext and CallerFromContext itself.
type invCtx struct {
	context.Context
	env    *InvocationEnvelope
	caller *Caller
}

// Value implements context.Context.
func (c *invCtx) Value(key any) any {
	switch key {
	case invocationKey{}:
		return c.env
	case callerKey{}:
		if c.caller != nil {
			return c.caller
		}
	}
	return c.Context.Value(key)
}

// newSealer returns a sealer for the invocation's next event.
func (inv *invocation) newSealer() *sealer {
	if inv.sealers < len(inv.sealArr) {
		inv.sealers++
		return &inv.sealArr[inv.sealers-1]
	}
	return new(sealer)
}

// Invoke runs env through the gate pipeline (chp-invocation-pipeline.md §2)
// and returns the result once its evidence is durable. Governance denials,
// skips and handler failures are results, not errors: the error is non-nil
// only when evidence could not be recorded (or ctx ended first), in which
// case no result may be trusted. env is normalized in place (see Normalize).
func (b *Boundary) Invoke(ctx context.Context, env *InvocationEnvelope) (*InvocationResult, error) {
	caller, _ := CallerFromContext(ctx)
	return b.invoke(ctx, env, caller)
}

// invoke is Invoke with the bound caller (nil: none) passed in rather than
// carried by ctx.
func (b *Boundary) invoke(ctx context.Context, env *InvocationEnvelope, caller *Caller) (*InvocationResult, error) {
	return b.invokeIn(ctx, new(invocation), env, caller)
}

// invokeIn is invoke with the invocation's state in inv (zero, or holding
// env in envBuf).
func (b *Boundary) invokeIn(ctx context.Context, inv *invocation, env *InvocationEnvelope, caller *Caller) (*InvocationResult, error) {
	if env == nil {
		return nil, fmt.Errorf("%w: nil envelope", ErrBadEnvelope)
	}
	now := b.now()
	if env.InvocationID == "" && env.Correlation.CorrelationID == "" {
		// The common direct call: its two ids and the ids of its first two
		// events drawn at once.
		var ids [4]string
		newIDs(ids[:], "inv", "corr", "evt", "evt")
		env.InvocationID, env.Correlation.CorrelationID, env.freshID = ids[0], ids[1], true
		inv.spare, inv.nspare = [2]string{ids[3], ids[2]}, 2
	}
	Normalize(env, now)
	// An id Normalize generated for this envelope cannot have been
	// recorded; once invoked, it is an id like any other (a caller may
	// invoke the same envelope again, and must get the recorded result).
	fresh := env.freshID
	env.freshID = false
	if env.Correlation.Environment == "" {
		env.Correlation.Environment = b.cfg.Environment
	}
	hasCaller := caller != nil
	if hasCaller {
		env.Subject = caller.subject()
	}
	inv.env = env
	inv.pending, inv.ids = inv.pendArr[:0], inv.idArr[:0]
	if inv.ctx == nil {
		inv.ctx = &inv.ctxBuf
	}
	*inv.ctx = invCtx{Context: ctx, env: env, caller: caller}
	defer inv.releaseStage()
	var err error
	if inv.hdr, err = b.header(inv, env, caller); err != nil {
		return nil, err
	}

	// Key scope (chp-http-binding.md §2): governance, before anything else —
	// replay must not bypass it either.
	if hasCaller && !ScopeAllows(caller.Scope, env.CapabilityID) {
		return b.finishDenied(ctx, inv, b.denial(CodePolicyBlocked,
			fmt.Sprintf("capability %q is outside caller %q's key scope", env.CapabilityID, caller.ID),
			map[string]any{"decision": "deny", "matched_rule": "key_scope", "policy_version": nil,
				"explanation": "the caller's key is scoped to other capabilities", "required_next_action": nil}))
	}

	// Gate 0: idempotent replay by invocation_id.
	for {
		recorded, wait, err := b.results.claim(env.InvocationID, fresh)
		if err != nil {
			return nil, err
		}
		if recorded != nil {
			r := *recorded
			r.Replayed = true
			return &r, nil
		}
		if wait != nil {
			// The same id is in flight: wait for its outcome. If it
			// recorded nothing (its evidence failed), the next claim leads.
			select {
			case <-wait:
				fresh = false // it may have been recorded meanwhile
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		// Neither recorded nor in flight: this call leads.
		res, err := b.pipeline(ctx, inv)
		if err != nil {
			res = nil
		}
		b.results.settle(env.InvocationID, res, inv.recorded, inv.lastTS)
		return res, err
	}
}

// pipeline runs gates 1–12.
func (b *Boundary) pipeline(ctx context.Context, inv *invocation) (*InvocationResult, error) {
	env := inv.env
	// Gate 1: non-empty id.
	if isBlank(env.CapabilityID) {
		return b.finishDenied(ctx, inv, b.denial(CodeCapabilityNotFound, "capability_id is missing or empty",
			map[string]any{"hint": "set the envelope's capability_id"}))
	}
	// Gate 2: resolution.
	r, deny := b.resolve(env.CapabilityID, env.Version)
	if deny != nil {
		return b.finishDenied(ctx, inv, deny)
	}
	inv.cap = r
	inv.version = &r.desc.Version // immutable once registered
	d := &r.desc
	uri := r.uri

	// Gate 3: enabled (a skip, not a denial).
	if !r.enabled.Load() {
		reason := b.denial(CodeCapabilityDisabled, "Capability disabled: "+d.URI(), nil)
		b.emit(inv, evt{typ: EventSkipped, outcome: OutcomeSkipped, payload: map[string]any{"reason": CodeCapabilityDisabled}, denial: reason})
		return b.finish(ctx, inv, OutcomeSkipped, nil, reason, nil)
	}
	// Gate 4: mode.
	if !contains(d.Modes, env.Mode) {
		return b.finishDenied(ctx, inv, b.denial(CodeUnsupportedMode,
			fmt.Sprintf("Capability %s does not support mode %s", d.URI(), env.Mode),
			map[string]any{"requested": env.Mode, "supported": toAny(d.Modes)}))
	}
	// Gate 5: mandate. capmesh does not verify mandates yet, so a presented
	// mandate is never trusted: it fails closed.
	if !isNull(env.Mandate) {
		return b.finishDenied(ctx, inv, b.denial(CodeMandateInvalid,
			"this host does not accept delegated mandates", map[string]any{"checks": map[string]any{"supported": false}}))
	}
	// Gate 6: policy.
	if p := b.cfg.Policy; p != nil {
		if rule, why := p.decide(d, env.Payload); rule != "" {
			record := map[string]any{"decision": "deny", "matched_rule": rule, "policy_version": nilIfEmpty(p.Version),
				"explanation": why, "required_next_action": nil}
			if !p.AuditOnly {
				return b.finishDenied(ctx, inv, b.denial(CodePolicyBlocked, why, record))
			}
			record["audit_only"] = true
			b.emit(inv, evt{typ: "io.github.capmesh.policy_audited", payload: record})
		}
	}
	// Gate 7: host-enforced invariants.
	for _, chk := range r.checkers {
		ok, msg, err := chk.check(ctx, env)
		if err != nil {
			ok, msg = false, "invariant could not be evaluated: "+err.Error()
		}
		if ok {
			continue
		}
		if chk.desc.FailureBehavior != "deny" {
			b.emit(inv, evt{typ: "io.github.capmesh.invariant_warning", uri: uri, payload: map[string]any{
				"invariant_id": chk.desc.ID, "message": msg}})
			continue
		}
		id := chk.desc.ID
		dn := b.denial(CodeInvariantFailed, msg, map[string]any{"kind": chk.desc.Kind})
		dn.InvariantID = &id
		return b.finishDenied(ctx, inv, dn)
	}
	// Gate 8: autonomy. The count and the execution_started append must be
	// atomic per correlation, or two concurrent calls both pass the budget.
	if a := d.Autonomy; a != nil {
		mu := b.stripe(env.Correlation.CorrelationID)
		mu.Lock()
		defer mu.Unlock()
		if res, err, denied := b.autonomyGate(ctx, inv, a, uri); denied {
			return res, err
		}
	}
	// Gate 9: input schema.
	if r.input != nil {
		if path, msg, ok := r.input.validate(env.Payload); !ok {
			return b.finishDenied(ctx, inv, b.denial(CodeInputSchemaValidationFailed,
				"payload fails the input schema "+msg,
				map[string]any{"schema_id": d.URI() + "#input_schema", "path": path}))
		}
	}
	// Gate 10: safety.
	if s := b.cfg.Safety; s != nil {
		verdict := s.Assess(ctx, d, env)
		b.emit(inv, evt{typ: EventSafetyStarted, uri: uri})
		b.emit(inv, evt{typ: EventSafetyCompleted, uri: uri, payload: map[string]any{
			"approved": verdict.Approved, "level": verdict.Level, "score": verdict.Score}})
		if !verdict.Approved {
			ev := toAny(verdict.Evaluated)
			b.emit(inv, evt{typ: EventSafetyTriggered, uri: uri, payload: map[string]any{
				"guardrails_evaluated": ev, "reason": verdict.Reason}})
			b.emit(inv, evt{typ: EventSafetyBlocked, outcome: OutcomeDenied, uri: uri, payload: map[string]any{"reason": verdict.Reason}})
			return b.finishDenied(ctx, inv, b.denial(CodeSafetyBlocked, verdict.Reason,
				map[string]any{"level": verdict.Level, "score": verdict.Score}))
		}
		b.emit(inv, evt{typ: EventSafetyApproved, uri: uri, payload: map[string]any{
			"level": verdict.Level, "recommendation": "allow"}})
	}
	// Gate 11: execute.
	return b.execute(ctx, inv, uri)
}

func (b *Boundary) autonomyGate(ctx context.Context, inv *invocation, a *AutonomyProfile, uri string) (*InvocationResult, error, bool) {
	d := &inv.cap.desc
	corr := inv.env.Correlation.CorrelationID
	started, err := b.store.Count(ctx, corr, EventStarted)
	if err != nil {
		return nil, fmt.Errorf("chp: counting autonomy budget: %w", err), true
	}
	started += countPending(inv.pending, EventStarted)
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
		payload := make(map[string]any, len(details))
		for k, v := range details {
			payload[k] = v
		}
		b.emit(inv, evt{typ: EventBudgetExceeded, outcome: OutcomeDenied, uri: uri, payload: payload})
		res, err := b.finishDenied(ctx, inv, b.denial(CodeBudgetExceeded,
			fmt.Sprintf("%s reached for correlation %s (actions_taken=%d)", over, corr, started), details))
		return res, err, true
	}
	if a.Tier == "approval_required" {
		b.emit(inv, evt{typ: EventApprovalRequested, outcome: OutcomeDenied, uri: uri, payload: map[string]any{
			"tier": a.Tier}})
		res, err := b.finishDenied(ctx, inv, b.denial(CodeApprovalRequired,
			fmt.Sprintf("Capability %s requires explicit approval", d.URI()), map[string]any{"tier": a.Tier}))
		return res, err, true
	}
	return nil, nil, false
}

type handlerOutcome struct {
	data json.RawMessage
	err  error
	pan  any
}

// run calls the handler, turning a panic into an outcome.
func (b *Boundary) run(ctx context.Context, inv *invocation) (out handlerOutcome) {
	defer func() {
		if p := recover(); p != nil {
			out = handlerOutcome{pan: p}
			b.log.Error("capability handler panicked", "capability", inv.cap.uri, "panic", p, "stack", string(debug.Stack()))
		}
	}()
	out.data, out.err = inv.cap.handler(ctx, inv.env.Payload)
	return out
}

// execute is gate 11 (and 12).
func (b *Boundary) execute(ctx context.Context, inv *invocation, uri string) (*InvocationResult, error) {
	d := &inv.cap.desc
	b.emit(inv, evt{typ: EventStarted, uri: uri})
	inv.startedTS = inv.lastTS // execution_started's timestamp
	inv.started = &inv.startedAt
	// execution_started reaches the store before the handler runs, so the
	// autonomy count and a concurrent replay see it.
	if err := b.flush(ctx, inv); err != nil {
		return nil, err
	}
	var hctx context.Context = inv.ctx
	var out handlerOutcome
	var timeout time.Duration
	if d.TimeoutS != nil && *d.TimeoutS > 0 {
		// Only a capability with a timeout pays for a timer and a
		// goroutine: the handler may ignore cancellation, and the host must
		// still answer.
		timeout = time.Duration(*d.TimeoutS * float64(time.Second))
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(hctx, timeout)
		defer cancel()
		done := make(chan handlerOutcome, 1)
		go func() { done <- b.run(hctx, inv) }()
		grace := time.NewTimer(timeout + b.cfg.TimeoutGrace)
		defer grace.Stop()
		select {
		case out = <-done:
		case <-grace.C:
			// The handler ignored cancellation: whether its side effect
			// happened is unknown. Record that honestly (proposal 0043).
			msg := fmt.Sprintf("handler did not return within timeout_s=%g plus %s grace", *d.TimeoutS, b.cfg.TimeoutGrace)
			info := &ErrorInfo{Message: msg, Type: "timeout"}
			b.emit(inv, evt{typ: EventIndeterminate, outcome: OutcomeIndeterminate, uri: uri, err: info})
			return b.finish(ctx, inv, OutcomeIndeterminate, nil, nil, info)
		}
	} else {
		out = b.run(hctx, inv)
	}
	if out.pan != nil || out.err != nil {
		info := &ErrorInfo{Type: "error"}
		switch {
		case out.pan != nil:
			info.Type, info.Message = "panic", fmt.Sprint(out.pan)
		case errors.Is(out.err, context.DeadlineExceeded) && timeout > 0:
			info.Type, info.Message = "timeout", fmt.Sprintf("capability exceeded timeout_s=%g: %v", *d.TimeoutS, out.err)
		default:
			info.Message = out.err.Error()
			var te interface{ ErrorType() string }
			if errors.As(out.err, &te) {
				info.Type = te.ErrorType()
			}
		}
		b.emit(inv, evt{typ: EventFailed, outcome: OutcomeFailure, uri: uri, err: info})
		return b.finish(ctx, inv, OutcomeFailure, nil, nil, info)
	}
	data := out.data
	if isNull(data) {
		data = nil
	} else if !json.Valid(data) {
		info := &ErrorInfo{Type: "invalid_result", Message: "handler returned invalid JSON"}
		b.emit(inv, evt{typ: EventFailed, outcome: OutcomeFailure, uri: uri, err: info})
		return b.finish(ctx, inv, OutcomeFailure, nil, nil, info)
	}
	var completed map[string]any
	// Gate 12: output schema.
	if r := inv.cap.output; r != nil {
		if path, msg, ok := r.validate(data); !ok {
			if b.cfg.StrictOutputSchema {
				return b.finishDenied(ctx, inv, b.denial(CodeOutputSchemaValidationFailed,
					"result fails the output schema "+msg,
					map[string]any{"schema_id": d.URI() + "#output_schema", "path": path}))
			}
			completed = map[string]any{"output_schema_valid": false, "output_schema_error": msg}
		}
	}
	b.emit(inv, evt{typ: EventCompleted, outcome: OutcomeSuccess, uri: uri, payload: completed})
	return b.finish(ctx, inv, OutcomeSuccess, data, nil, nil)
}

// finishDenied emits execution_denied and returns the denied result.
func (b *Boundary) finishDenied(ctx context.Context, inv *invocation, d *DenialReason) (*InvocationResult, error) {
	b.emit(inv, evt{typ: EventDenied, outcome: OutcomeDenied, payload: map[string]any{"reason": d.Code}, denial: d})
	return b.finish(ctx, inv, OutcomeDenied, nil, d, nil)
}

// finish appends the remaining events, records the result (with a durable
// store, beside the evidence), waits until both are durable and returns the
// result.
func (b *Boundary) finish(ctx context.Context, inv *invocation, o Outcome, data json.RawMessage, d *DenialReason, e *ErrorInfo) (*InvocationResult, error) {
	if err := b.flush(ctx, inv); err != nil {
		return nil, err
	}
	capID := inv.env.CapabilityID
	if inv.cap != nil {
		capID = inv.cap.desc.ID
	}
	if capID == "" {
		capID = "<missing>"
	}
	now := inv.lastTS // the final event's
	if now.IsZero() {
		now = b.now()
		inv.lastTS = now
	}
	res := new(InvocationResult)
	if inv.direct {
		res = &inv.resBuf
	}
	*res = InvocationResult{
		CapabilityID:      capID,
		CapabilityVersion: inv.version,
		CompletedAt:       inv.times(now),
		Correlation:       inv.env.Correlation,
		Data:              data,
		Denial:            d,
		Error:             e,
		EvidenceIDs:       inv.ids,
		InvocationID:      inv.env.InvocationID,
		Outcome:           o,
		StartedAt:         inv.started,
		Success:           o == OutcomeSuccess,
	}
	// The result recorded for idempotent replay is kept encoded: beside
	// the evidence in a durable store, and in the replay cache (which
	// copies it out of the heap). It is encoded into the invocation's
	// stage, free once the evidence is appended.
	st := inv.stage()
	raw, err := appendResult(st.scratch[:0], res, inv.hdr.corr)
	if err == nil {
		inv.recorded = raw
		st.scratch = raw[:0]
	}
	if b.rstore != nil {
		if err == nil {
			err = b.rstore.PutResult(ctx, evidence.Result{InvocationID: res.InvocationID, At: now, Data: raw})
		}
		if err != nil {
			return nil, fmt.Errorf("chp: recording the result: %w", err)
		}
	}
	if err := b.store.Sync(ctx, inv.last); err != nil {
		return nil, fmt.Errorf("chp: evidence not durable: %w", err)
	}
	return res, nil
}

// times renders completed_at (returned) and, when execution started,
// started_at (into startedAt) in one allocation.
func (inv *invocation) times(completed time.Time) string {
	var buf [2 * len(TimeFormat)]byte
	b := appendTime(buf[:0], completed)
	n := len(b)
	if inv.started == nil {
		return string(b)
	}
	b = appendTime(b, inv.startedTS)
	s := string(b)
	inv.startedAt = s[n:]
	return s[:n]
}

// emit queues one event; flush appends the queue.
func (b *Boundary) emit(inv *invocation, e evt) {
	if inv.nspare == 0 {
		newIDs(inv.spare[:], "evt", "evt")
		inv.nspare = 2
	}
	inv.nspare--
	id := inv.spare[inv.nspare]
	inv.ids = append(inv.ids, id)
	inv.pending = append(inv.pending, b.pendingEvent(inv, id, e))
}

func (b *Boundary) flush(ctx context.Context, inv *invocation) error {
	if len(inv.pending) == 0 {
		return nil
	}
	last, err := evidence.AppendSeq(ctx, b.store, inv.pending...)
	clear(inv.pending) // the sealers, now spent
	inv.pending = inv.pending[:0]
	if inv.st != nil {
		inv.st.buf = inv.st.buf[:0] // their staged bytes too
	}
	if err != nil {
		return fmt.Errorf("chp: recording evidence: %w", err)
	}
	inv.last = last
	return nil
}

func countPending(p []evidence.Pending, typ string) int {
	n := 0
	for _, e := range p {
		if e.EventType == typ {
			n++
		}
	}
	return n
}

func isBlank(s string) bool {
	for _, r := range s {
		if r != ' ' && r != '\t' && r != '\n' && r != '\r' && r != '\f' && r != '\v' {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
