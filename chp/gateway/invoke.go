package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/tracing"
)

// routed is one invocation as the gateway routes it: the caller's envelope
// (parsed, for its ids) and the body forwarded to the owner.
type routed struct {
	env  *chp.InvocationEnvelope
	body []byte
	// clientID is the invocation id the caller sent ("" when it sent none).
	clientID string
	// cacheKey is the key of the exactly-once cache: clientID and a hash
	// of the request it names, so that a result is replayed only to the
	// same request, never to another caller that reuses a seen id.
	cacheKey string
}

// requestKey is id with the SHA-256 of what makes env the request it is.
func requestKey(id string, env *chp.InvocationEnvelope) string {
	b, _ := json.Marshal([]any{env.CapabilityID, env.RequestedCapabilityVersion,
		env.Mode, env.Payload, env.Subject, env.Mandate})
	sum := sha256.Sum256(b)
	return id + "#" + hex.EncodeToString(sum[:])
}

// serveInvoke answers POST /invoke: the exactly-once cache, then the owners
// in order until one answers.
func (g *Gateway) serveInvoke(w http.ResponseWriter, r *http.Request) {
	body, ok := g.readBody(w, r)
	if !ok {
		return
	}
	inv, err := prepare(body)
	if err != nil {
		httpError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	r = withTrace(r, inv)
	if inv.env.Mode == "stream" {
		// Streams are not relayed: the binding's rule for a mode a target
		// cannot serve is the ordinary processed denial.
		g.writeDenial(r.Context(), w, inv, "unsupported_mode", "the CHP gateway does not relay streaming invocations", false, nil)
		return
	}
	if inv.clientID != "" {
		cached, release, ok := g.claim(r.Context(), inv.cacheKey)
		if !ok {
			return // the caller left while another attempt was running
		}
		if cached != nil {
			writeRaw(w, http.StatusOK, cached)
			return
		}
		defer release()
	}
	owners := g.owners(inv.env.CapabilityID)
	if len(owners) == 0 {
		g.discoverMissing(r.Context())
		owners = g.owners(inv.env.CapabilityID)
	}
	if len(owners) == 0 {
		g.writeDenial(r.Context(), w, inv, "capability_not_found",
			"no member host serves "+strconv.Quote(inv.env.CapabilityID), false, nil)
		return
	}
	owners = g.order(owners, preferred(inv.env.Metadata))
	var lastErr error
	for _, u := range owners {
		status, resp, err := g.memberDo(r.Context(), http.MethodPost, u, "/invoke", inv.body)
		if err == nil && unavailable(status) {
			err = fmt.Errorf("%s/invoke: HTTP %d", u, status)
		}
		if err != nil {
			if r.Context().Err() != nil {
				return // the caller left; nothing to answer
			}
			lastErr = err
			g.setHealth(r.Context(), inv, u, false, err)
			continue
		}
		g.setHealth(r.Context(), inv, u, true, nil)
		if status == http.StatusOK && inv.clientID != "" && definitive(resp) {
			g.remember(r.Context(), inv.cacheKey, resp)
		}
		writeRaw(w, status, resp)
		return
	}
	details := map[string]any{"attempted_hosts": owners, "retry_after_s": int(g.cfg.RetryAfter.Seconds())}
	if lastErr != nil {
		details["last_error"] = lastErr.Error()
	}
	g.writeDenial(r.Context(), w, inv, "host_unreachable",
		"no owner of "+strconv.Quote(inv.env.CapabilityID)+" is reachable", true, details)
}

// prepare parses the caller's body and builds the body to forward: the
// caller's bytes unchanged when they name an invocation id and a
// correlation id, else the same members (each value's bytes unchanged,
// the mandate included) plus the ids the gateway minted, so that the
// owner's evidence and the gateway's share one correlation.
func prepare(body []byte) (*routed, error) {
	env, err := chp.ParseEnvelope(body)
	if err != nil {
		return nil, err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(body, &members); err != nil {
		return nil, err
	}
	inv := &routed{env: env, body: body}
	var id string
	if raw, ok := members["invocation_id"]; ok && json.Unmarshal(raw, &id) == nil && id != "" {
		inv.clientID, inv.cacheKey = id, requestKey(id, env)
	}
	var corr struct {
		CorrelationID string `json:"correlation_id"`
	}
	if raw, ok := members["correlation"]; ok {
		_ = json.Unmarshal(raw, &corr)
	}
	if inv.clientID != "" && corr.CorrelationID != "" {
		return inv, nil
	}
	members["invocation_id"], _ = json.Marshal(env.InvocationID)
	if members["correlation"], err = json.Marshal(env.Correlation); err != nil {
		return nil, err
	}
	delete(members, "correlation_id") // lifted into correlation
	inv.body = encodeRaw(members)
	return inv, nil
}

// encodeRaw writes an object whose member values are copied byte for byte,
// keys sorted.
func encodeRaw(members map[string]json.RawMessage) []byte {
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(members[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// preferred reads metadata.prefer: a member URL the caller asks to be
// tried first (affinity).
func preferred(metadata json.RawMessage) string {
	var m struct {
		Prefer string `json:"prefer"`
	}
	if len(metadata) > 0 {
		_ = json.Unmarshal(metadata, &m)
	}
	if u, err := normalizeURL(m.Prefer); err == nil {
		return u
	}
	return ""
}

// order puts the preferred owner first, then the healthy owners, then the
// ones marked unhealthy (still tried: a host recovers, and only a
// response tells).
func (g *Gateway) order(owners []string, prefer string) []string {
	healthy := map[string]bool{}
	for _, m := range g.snapshot() {
		healthy[m.url] = m.healthy
	}
	rank := func(u string) int {
		switch {
		case u == prefer:
			return 0
		case healthy[u]:
			return 1
		default:
			return 2
		}
	}
	out := slices.Clone(owners)
	slices.SortStableFunc(out, func(a, b string) int { return rank(a) - rank(b) })
	return out
}

// definitive reports whether a member's answer is a processed outcome the
// exactly-once cache keeps: anything but a retryable denial (§13.2).
func definitive(resp []byte) bool {
	var res struct {
		Outcome string `json:"outcome"`
		Denial  *struct {
			Retryable bool `json:"retryable"`
		} `json:"denial"`
	}
	if json.Unmarshal(resp, &res) != nil || res.Outcome == "" {
		return false
	}
	return res.Denial == nil || !res.Denial.Retryable
}

// writeDenial records the gateway's own processed denial as an
// execution_denied event on its chain and answers it with HTTP 200.
func (g *Gateway) writeDenial(ctx context.Context, w http.ResponseWriter, inv *routed, code, msg string, retryable bool, details map[string]any) {
	if details == nil {
		details = map[string]any{}
	}
	rawDetails, err := json.Marshal(details)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	d := &chp.DenialReason{Code: code, Message: msg, Retryable: retryable, Details: rawDetails}
	now := chp.FormatTime(g.cfg.Now())
	res := &chp.InvocationResult{
		CapabilityID: inv.env.CapabilityID, CompletedAt: now, Correlation: inv.env.Correlation,
		Denial: d, InvocationID: inv.env.InvocationID, Outcome: chp.OutcomeDenied, StartedAt: &now,
		EvidenceIDs: []string{},
	}
	// The gateway authenticates no one: the caller's subject is a claim.
	id, err := g.record(ctx, inv, chp.EventDenied, chp.OutcomeDenied, d, boundary.ClaimedSubject(inv.env.Subject), nil)
	if err != nil {
		// A denial the gateway cannot record is still a denial; the caller
		// learns the evidence is missing, as the binding's evidence errors.
		g.log.Error("CHP gateway: denial not recorded", "code", code, "err", err)
		if !errors.Is(err, context.Canceled) {
			httpError(w, http.StatusInternalServerError, "evidence_unavailable", err.Error())
		}
		return
	}
	res.EvidenceIDs = append(res.EvidenceIDs, id)
	writeJSON(w, http.StatusOK, res)
}

// unavailable reports whether a member's HTTP status says it did not take
// the invocation (a proxy's or an overloaded server's answer), so another
// owner may: 502, 503, 504. Any other status — a 500 included, after which
// the work may have run — is the member's answer, passed through.
func unavailable(status int) bool {
	return status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout
}

// claim returns id's cached result, or makes this request the only one
// routing id until release is called: a concurrent attempt with the same
// id waits for it, then replays what it recorded (or, after a retryable
// outcome, routes in turn). ok is false when ctx ended while waiting.
func (g *Gateway) claim(ctx context.Context, id string) (cached []byte, release func(), ok bool) {
	for {
		if c, hit := g.cache.get(id); hit {
			return c, nil, true
		}
		g.flightMu.Lock()
		ch, busy := g.inFlight[id]
		if !busy {
			ch = make(chan struct{})
			g.inFlight[id] = ch
			g.flightMu.Unlock()
			return nil, func() {
				g.flightMu.Lock()
				delete(g.inFlight, id)
				g.flightMu.Unlock()
				close(ch)
			}, true
		}
		g.flightMu.Unlock()
		if waiting != nil {
			waiting(id)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, nil, false
		}
	}
}

// waiting, when set (by tests), is called when a request starts waiting
// for another attempt with the same invocation id.
var waiting func(id string)

// remember caches a member's definitive result under the client's id and,
// when the gateway's store keeps results, makes it durable before the
// caller sees it, so a retry replays after a gateway restart too. A
// result that cannot be made durable is still served (and cached in
// memory): the owner's own idempotency stays the fallback.
func (g *Gateway) remember(ctx context.Context, id string, resp []byte) {
	now := g.cfg.Now()
	if !g.cache.put(id, resp, now) {
		return
	}
	rs, ok := g.store.(evidence.ResultStore)
	if !ok {
		return
	}
	err := rs.PutResult(ctx, evidence.Result{InvocationID: id, At: now, Data: resp})
	if err == nil {
		err = g.store.Sync(ctx, 0)
	}
	if err != nil {
		g.log.Error("CHP gateway: result not made durable", "invocation_id", id, "err", err)
	}
}

// withTrace carries the caller's W3C traceparent header (a malformed one
// is dropped, as W3C Trace Context says) in r's context, so that the
// member requests of the invocation (POST /invoke, not the discovery
// probes it may trigger) pass it on unchanged (memberDo), and
// records its trace id in the correlation of the gateway's own events
// when the envelope names none — what a member's boundary does with the
// same header. The gateway takes part in no trace itself: it forwards the
// caller's parent span as a proxy that records no span of its own.
func withTrace(r *http.Request, inv *routed) *http.Request {
	sc, err := tracing.ParseTraceparent(r.Header.Get("Traceparent"))
	if err != nil {
		return r
	}
	if inv.env.Correlation.TraceID == nil {
		id := sc.TraceID.String()
		inv.env.Correlation.TraceID = &id
	}
	return r.WithContext(tracing.ContextWith(r.Context(), sc))
}
