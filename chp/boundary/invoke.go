package boundary

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary/governance"
	"github.com/capmesh/capmesh/chp/boundary/internal/evjson"
	"github.com/capmesh/capmesh/chp/boundary/internal/invtrace"
	"github.com/capmesh/capmesh/chp/boundary/internal/replaycache"
	"github.com/capmesh/capmesh/chp/boundary/internal/streamrec"
	"github.com/capmesh/capmesh/evidence"
)

// invocation is the pipeline state of one call.
type invocation struct {
	env     *chp.InvocationEnvelope
	hdr     invHeader
	cap     *registered // nil before resolution
	version *string
	pending []evidence.Pending
	ids     []string
	started *string
	last    uint64
	// newChain: the correlation id was drawn for this call and nothing
	// of it is appended yet, so the next append's pendings carry
	// evidence.Pending.NewChain; flush clears it.
	newChain bool
	// recorded is the encoded result written to a durable store; the
	// replay cache keeps it instead of a copy of the result.
	recorded []byte
	// req identifies the request, for idempotent replay; noRecord keeps
	// the result from being recorded (an idempotency conflict's denial).
	req      replaycache.RequestDigest
	noRecord bool

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

	// A call answered at once (InvokeCall) keeps its result in its
	// invocation, which is recycled once the result is answered.
	direct bool
	resBuf chp.InvocationResult

	// stream is a streaming invocation's state (nil: not streaming).
	stream *streamrec.Run
	// autonomy is the correlation's stripe while gate 8 holds it.
	autonomy *sync.Mutex
	// trace holds a traced invocation's spans (trace.go; nil: untraced).
	trace *invtrace.Trace
}

// A Call is one invocation that a binding answers as soon as it has the
// result (a direct JSON-RPC call of a capability method): the envelope and
// the context its handler runs with, in one allocation. The handler may keep
// both beyond its return, so they are never part of a recycled invocation,
// and a Call is used once.
type Call struct {
	// Envelope is the invocation to run; InvokeCall normalizes it in place.
	Envelope chp.InvocationEnvelope
	ctx      invCtx
}

// invocationPool recycles the invocations of calls answered at once
// (InvokeCall): at a kilobyte each they were most of what a call allocated.
var invocationPool = sync.Pool{New: func() any { return new(invocation) }}

// recycle returns an InvokeCall invocation to the pool once its result
// has been turned into the answer (the answer copies what it keeps: the
// handler's data, or the whole result encoded as an error's data).
// Nothing refers to it any more — not the result (inv.resBuf, whose
// evidence ids and started_at point into inv), not the handler (its
// envelope and context are the call's own), not the store (which copied
// every event), not the replay cache (which copied the result).
func (inv *invocation) recycle() {
	*inv = invocation{}
	invocationPool.Put(inv)
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
func (b *Boundary) Invoke(ctx context.Context, env *chp.InvocationEnvelope) (*chp.InvocationResult, error) {
	caller, _ := CallerFromContext(ctx)
	return b.invoke(ctx, env, caller)
}

// invoke is Invoke with the bound caller (nil: none) passed in rather than
// carried by ctx.
func (b *Boundary) invoke(ctx context.Context, env *chp.InvocationEnvelope, caller *Caller) (*chp.InvocationResult, error) {
	return b.invokeIn(ctx, new(invocation), env, caller)
}

// InvokeCall runs c.Envelope through the pipeline as Invoke does, with
// caller bound (nil: none), and passes the result to answer. Once answer
// returns, the memory behind the result is reused for other calls: answer
// must copy what it keeps. The error is Invoke's; answer is not called when
// it is non-nil.
func (b *Boundary) InvokeCall(ctx context.Context, c *Call, caller *Caller, answer func(*chp.InvocationResult)) error {
	inv := invocationPool.Get().(*invocation)
	inv.direct, inv.ctx = true, &c.ctx
	res, err := b.invokeIn(ctx, inv, &c.Envelope, caller)
	if err != nil {
		return err
	}
	answer(res)
	if res == &inv.resBuf { // not a replayed result
		inv.recycle()
	}
	return nil
}

// invokeEnv is invoke with the invocation's state in inv (zero, or holding
// env in envBuf), traced by invokeIn (trace.go).
func (b *Boundary) invokeEnv(ctx context.Context, inv *invocation, env *chp.InvocationEnvelope, caller *Caller) (*chp.InvocationResult, error) {
	if env == nil {
		return nil, fmt.Errorf("%w: nil envelope", chp.ErrBadEnvelope)
	}
	now := b.now()
	// An id drawn here for this call cannot have been recorded (128 random
	// bits), so its claim skips the replay index. Once invoked it is an id
	// like any other: invoking the same envelope again replays its result.
	fresh := env.InvocationID == ""
	// A correlation id drawn here (or by Normalize) is new: the first
	// append of its chain tells the store so (newChain).
	inv.newChain = env.Correlation.CorrelationID == ""
	switch {
	case fresh && env.Correlation.CorrelationID == "":
		// The common direct call: its two ids and the ids of its first two
		// events drawn at once.
		var ids [4]string
		chp.NewIDs(ids[:], "inv", "corr", "evt", "evt")
		env.InvocationID, env.Correlation.CorrelationID = ids[0], ids[1]
		inv.spare, inv.nspare = [2]string{ids[3], ids[2]}, 2
	case fresh:
		env.InvocationID = chp.NewID("inv")
	}
	chp.Normalize(env, now)
	if env.Correlation.Environment == "" {
		env.Correlation.Environment = b.cfg.Environment
	}
	hasCaller := caller != nil
	if hasCaller && !caller.Claimed {
		env.Subject = caller.subject()
	} else {
		env.Subject = ClaimedSubject(env.Subject)
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
	st := inv.stage()
	inv.req, st.scratch = requestDigest(st.scratch, env, inv.hdr.subjectC)

	// Key scope (chp-http-binding.md §2): governance, before anything else —
	// replay must not bypass it either.
	inv.gate("key_scope")
	if hasCaller && !governance.ScopeAllows(caller.Scope, env.CapabilityID) {
		return b.finishDenied(ctx, inv, b.denial(chp.CodePolicyBlocked,
			fmt.Sprintf("capability %q is outside caller %q's key scope", env.CapabilityID, caller.ID),
			map[string]any{"decision": "deny", "matched_rule": "key_scope", "policy_version": nil,
				"explanation": "the caller's key is scoped to other capabilities", "required_next_action": nil}))
	}

	// Gate 0: idempotent replay by invocation_id.
	inv.gate("replay")
	for {
		recorded, wait, err := b.results.Claim(env.InvocationID, fresh, inv.req)
		if errors.Is(err, replaycache.ErrConflict) {
			return b.idempotencyConflict(ctx, inv)
		}
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
		b.results.Settle(env.InvocationID, res, inv.recorded, inv.req, inv.lastTS)
		return res, err
	}
}

// pipeline runs gates 1–12: the gates table, then execute.
func (b *Boundary) pipeline(ctx context.Context, inv *invocation) (*chp.InvocationResult, error) {
	defer inv.unlockAutonomy()
	for i := range gates {
		inv.gate(gates[i].name)
		if res, err := gates[i].run(b, ctx, inv); res != nil || err != nil {
			return res, err
		}
	}
	return b.execute(ctx, inv, inv.cap.uri)
}

type handlerOutcome struct {
	data json.RawMessage
	err  error
	// panicID names a handler panic in the host log; the panic value
	// itself goes only there.
	panicID string
}

// run calls the handler, turning a panic into an outcome. The panic value
// and stack are logged under a fresh id; only that id reaches the caller
// and the evidence (a panic value can carry anything: secrets, internals).
func (b *Boundary) run(ctx context.Context, inv *invocation) (out handlerOutcome) {
	defer func() {
		if p := recover(); p != nil {
			out = handlerOutcome{panicID: chp.NewID("panic")}
			b.log.ErrorContext(ctx, "capability handler panicked", "panic_id", out.panicID, "capability", inv.cap.uri,
				"invocation_id", inv.env.InvocationID, "panic", p, "stack", string(debug.Stack()))
		}
	}()
	if inv.stream != nil && inv.cap.stream != nil {
		out.data, out.err = inv.cap.stream(ctx, inv.env.Payload, inv.stream.Send)
		return out
	}
	out.data, out.err = inv.cap.handler(ctx, inv.env.Payload)
	return out
}

// execute is gate 11 (and 12).
func (b *Boundary) execute(ctx context.Context, inv *invocation, uri string) (*chp.InvocationResult, error) {
	d := &inv.cap.desc
	inv.gate("execute")
	b.emit(inv, evt{typ: chp.EventStarted, uri: uri})
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
			info := &chp.ErrorInfo{Message: msg, Type: "timeout"}
			b.emit(inv, evt{typ: chp.EventIndeterminate, outcome: chp.OutcomeIndeterminate, uri: uri, err: info})
			return b.finish(ctx, inv, chp.OutcomeIndeterminate, nil, nil, info)
		}
	} else {
		out = b.run(hctx, inv)
	}
	if out.panicID != "" || out.err != nil {
		info := &chp.ErrorInfo{Type: "error"}
		switch {
		case out.panicID != "":
			info.Type, info.Message = "internal_error", "internal error "+out.panicID+" (details in the host log)"
		case errors.Is(out.err, context.DeadlineExceeded) && timeout > 0:
			info.Type, info.Message = "timeout", fmt.Sprintf("capability exceeded timeout_s=%g: %v", *d.TimeoutS, out.err)
		default:
			info.Message = out.err.Error()
			var te interface{ ErrorType() string }
			if errors.As(out.err, &te) {
				info.Type = te.ErrorType()
			}
		}
		b.emit(inv, evt{typ: chp.EventFailed, outcome: chp.OutcomeFailure, uri: uri, err: info, payload: inv.stream.Failed()})
		return b.finish(ctx, inv, chp.OutcomeFailure, nil, nil, info)
	}
	data := out.data
	if isNull(data) {
		data = nil
	} else if !json.Valid(data) {
		info := &chp.ErrorInfo{Type: "invalid_result", Message: "handler returned invalid JSON"}
		b.emit(inv, evt{typ: chp.EventFailed, outcome: chp.OutcomeFailure, uri: uri, err: info})
		return b.finish(ctx, inv, chp.OutcomeFailure, nil, nil, info)
	}
	var completed map[string]any
	// Gate 12: output schema.
	inv.gate("output_schema")
	if r := inv.cap.output; r != nil {
		if path, msg, ok := r.Validate(data); !ok {
			if b.cfg.StrictOutputSchema {
				return b.finishDenied(ctx, inv, b.denial(chp.CodeOutputSchemaValidationFailed,
					"result fails the output schema "+msg,
					map[string]any{"schema_id": d.URI() + "#output_schema", "path": path}))
			}
			completed = map[string]any{"output_schema_valid": false, "output_schema_error": msg}
		}
	}
	completed = b.streamCompleted(inv, completed)
	b.emit(inv, evt{typ: chp.EventCompleted, outcome: chp.OutcomeSuccess, uri: uri, payload: completed})
	return b.finish(ctx, inv, chp.OutcomeSuccess, data, nil, nil)
}

// finishDenied emits execution_denied and returns the denied result.
func (b *Boundary) finishDenied(ctx context.Context, inv *invocation, d *chp.DenialReason) (*chp.InvocationResult, error) {
	b.emit(inv, evt{typ: chp.EventDenied, outcome: chp.OutcomeDenied, payload: map[string]any{"reason": d.Code}, denial: d})
	return b.finish(ctx, inv, chp.OutcomeDenied, nil, d, nil)
}

// finish is record, with the Config's Observer (if any) told of the
// commit and the outcome.
func (b *Boundary) finish(ctx context.Context, inv *invocation, o chp.Outcome, data json.RawMessage, d *chp.DenialReason, e *chp.ErrorInfo) (*chp.InvocationResult, error) {
	inv.gateDone(d)
	obs := b.cfg.Observer
	if obs == nil {
		return b.record(ctx, inv, o, data, d, e)
	}
	events := len(inv.pending)
	start := time.Now()
	res, err := b.record(ctx, inv, o, data, d, e)
	obs.OnEvidenceCommit(events, time.Since(start), err)
	if err == nil {
		code := ""
		if d != nil {
			code = d.Code
		}
		obs.OnInvocation(o, code)
	}
	return res, err
}

// record appends the remaining events, records the result (with a durable
// store, beside the evidence), waits until both are durable and returns the
// result.
func (b *Boundary) record(ctx context.Context, inv *invocation, o chp.Outcome, data json.RawMessage, d *chp.DenialReason, e *chp.ErrorInfo) (*chp.InvocationResult, error) {
	if err := b.flush(ctx, inv); err != nil {
		return nil, err
	}
	capID := inv.capabilityID()
	now := inv.lastTS // the final event's
	if now.IsZero() {
		now = b.now()
		inv.lastTS = now
	}
	res := new(chp.InvocationResult)
	if inv.direct {
		res = &inv.resBuf
	}
	*res = chp.InvocationResult{
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
		Success:           o == chp.OutcomeSuccess,
	}
	// The result recorded for idempotent replay is kept encoded: beside
	// the evidence in a durable store, and in the replay cache (which
	// copies it out of the heap). It is encoded into the invocation's
	// stage, free once the evidence is appended.
	if inv.noRecord {
		if err := b.store.Sync(ctx, inv.last); err != nil {
			return nil, fmt.Errorf("boundary: evidence not durable: %w", err)
		}
		return res, nil
	}
	st := inv.stage()
	raw, err := evjson.AppendResult(st.scratch[:0], res, inv.hdr.corr)
	if err == nil {
		raw = replaycache.AppendRequest(raw, inv.req)
		inv.recorded = raw
		st.scratch = raw[:0]
	}
	if b.rstore != nil {
		if err == nil {
			err = b.rstore.PutResult(ctx, evidence.Result{InvocationID: res.InvocationID, At: now, Data: raw})
		}
		if err != nil {
			return nil, fmt.Errorf("boundary: recording the result: %w", err)
		}
	}
	if err := b.store.Sync(ctx, inv.last); err != nil {
		return nil, fmt.Errorf("boundary: evidence not durable: %w", err)
	}
	return res, nil
}

// times renders completed_at (returned) and, when execution started,
// started_at (into startedAt) in one allocation.
func (inv *invocation) times(completed time.Time) string {
	var buf [2 * len(chp.TimeFormat)]byte
	b := chp.AppendTime(buf[:0], completed)
	n := len(b)
	if inv.started == nil {
		return string(b)
	}
	b = chp.AppendTime(b, inv.startedTS)
	s := string(b)
	inv.startedAt = s[n:]
	return s[:n]
}

// emit queues one event; flush appends the queue.
func (b *Boundary) emit(inv *invocation, e evt) {
	if inv.nspare == 0 {
		chp.NewIDs(inv.spare[:], "evt", "evt")
		inv.nspare = 2
	}
	inv.nspare--
	id := inv.spare[inv.nspare]
	// id is the event id's random part: SealTo completes it with the
	// attribution digest (chp.IDBindMarker) in inv.ids.
	inv.ids = append(inv.ids, id)
	inv.pending = append(inv.pending, b.pendingEvent(inv, id, len(inv.ids)-1, e))
}

func (b *Boundary) flush(ctx context.Context, inv *invocation) error {
	if len(inv.pending) == 0 {
		return nil
	}
	sp := inv.appendSpan(len(inv.pending))
	for i := range inv.pending {
		inv.pending[i].After = inv.last // this invocation's records so far
	}
	last, err := evidence.AppendSeq(ctx, b.store, inv.pending...)
	// Only the chain's first append is new: a later one's hint could
	// meet a head the store has dropped from its cache. After a failed
	// append the chain is not known to be empty either.
	inv.newChain = false
	sp.End(err)
	clear(inv.pending) // the sealers, now spent
	inv.pending = inv.pending[:0]
	if inv.st != nil {
		inv.st.buf = inv.st.buf[:0] // their staged bytes too
	}
	if err != nil {
		return fmt.Errorf("boundary: recording evidence: %w", err)
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
