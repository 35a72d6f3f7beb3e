package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/schema"
)

// chpRequirement is one requirement of the CHP checklist: its stable id,
// the requirement as a report states it, the sections it comes from, how
// capmesh settles it (for docs/audit.md) and the check itself, which
// returns the status and, for anything but a pass, the reason.
//
// CHP v0.1 has no compliance levels: every requirement of §11 is a MUST
// (CHP.9 only where the host supports disabled capabilities).
type chpRequirement struct {
	id          string
	requirement string
	source      string
	how         string
	// extra marks capmesh's own check beyond §11's nine: its failure
	// counts in the summary, its pass does not.
	extra bool
	check func(ctx context.Context, a *chpAudit) (Status, string)
}

// chpChecklist is the CHP checklist: the nine requirements of CHP v0.1
// §11, with the section that details each, then the chain check, in
// report order. docs/audit.md lists it (TestAuditDocCHPChecklist keeps the
// two in step).
var chpChecklist = []chpRequirement{
	{"CHP.1", "capability declaration: a HostDescriptor with protocol_version and valid CapabilityDescriptors", "CHP v0.1 §3, §4, §11.1",
		"the HostDescriptor validates against host-descriptor.schema.json and declares capabilities", false, checkCHPDeclaration},
	{"CHP.2", "capability discovery lists the declared capabilities", "CHP v0.1 §11.2; HTTP binding §3 (GET /capabilities)",
		"`/capabilities` (or the descriptor) lists every declared capability", false, checkCHPDiscovery},
	{"CHP.3", "invocation through an envelope-compatible boundary returns an InvocationResult for every processed outcome", "CHP v0.1 §5, §8, §11.3; HTTP binding §1",
		"every invocation — success, failure, denial, skip — comes back as a schema-valid InvocationResult with its invocation_id, `success` true only for `success`", false, checkCHPEnvelope},
	{"CHP.4", "correlation: a caller's correlation_id is preserved, a missing one generated, both returned and in the evidence", "CHP v0.1 §5, §7, §11.4",
		"a given correlation_id comes back in every result and every event; an invocation without one gets one generated, returned and replayable", false, checkCHPCorrelation},
	{"CHP.5", "evidence on success: execution_started then execution_completed", "CHP v0.1 §6, §8, §11.5",
		"`execution_started` then `execution_completed`, by sequence", false, checkCHPSuccess},
	{"CHP.6", "evidence on failure: execution_started then execution_failed", "CHP v0.1 §8, §11.6",
		"`execution_started` then `execution_failed` (needs the fixture `conformance.fail`, or a capability that fails on `{}`; otherwise unknown)", false, checkCHPFailure},
	{"CHP.7", "evidence on denial: execution_denied with a stable denial code (unknown capability)", "CHP v0.1 §8, §9, §11.7",
		"an unknown capability is `denied` with `execution_denied` and a reserved code (`capability_not_found`)", false, checkCHPDenial},
	{"CHP.8", "replay by correlation id returns that correlation's events ordered by sequence", "CHP v0.1 §10, §11.8",
		"the audit correlation replays every invocation's events, strictly ordered by sequence, with a correct event_count", false, checkCHPReplay},
	{"CHP.9", "skipped execution is represented (outcome skipped, execution_skipped)", "CHP v0.1 §8, §11.9",
		"a disabled capability (declared with `enabled: false`, `status: \"disabled\"` or metadata `io.github.capmesh.enabled: false` — what capmesh hosts publish — or named with `--chp-disabled`) is `skipped` with `execution_skipped`; skip when none", false, checkCHPSkipped},
	{"CHP.chain", "the evidence chain of the audit correlation verifies, by the host and offline from its export", "CHP HTTP binding §4, §4a; chp-v0.2 §2-3 (hash chain, signed bundle)",
		"`/verify` asked, then the `/export` bundle re-verified offline (`chp.VerifyBundle`); the host's \"valid\" is not enough", true, checkCHPChain},
}

// invocation is one invocation the audit made and what came back.
type invocation struct {
	capability string
	id         string
	corr       string // requested correlation ("" = none)
	res        *chp.InvocationResult
	raw        json.RawMessage
	err        error
}

// event is the part of an ExecutionEvidence event the audit reads.
type event struct {
	EventType    string      `json:"event_type"`
	InvocationID string      `json:"invocation_id"`
	Sequence     json.Number `json:"sequence"`
	Correlation  struct {
		CorrelationID string `json:"correlation_id"`
	} `json:"correlation"`
}

// chpAudit is one run of the CHP checklist against a host: the
// descriptor it answered and, once exercise has run, the invocations made
// and the replay of their correlation.
type chpAudit struct {
	t    chpTransport
	o    *Options
	corr string
	now  func() time.Time

	descRaw json.RawMessage
	desc    chp.HostDescriptor
	descErr error

	exercised bool
	invs      []*invocation // every invocation on the audit correlation
	success   *invocation
	failure   *invocation
	denied    *invocation
	skipped   *invocation
	generated *invocation // the one sent without a correlation
	events    []event
	rr        *chp.ReplayResult
	rerr      error
}

func randomID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func (a *chpAudit) invoke(ctx context.Context, capID string, payload any, corr string) *invocation {
	inv := &invocation{capability: capID, id: randomID("capmesh-audit-inv-"), corr: corr}
	env := map[string]any{
		"invocation_id": inv.id,
		"capability_id": capID,
		"mode":          "sync",
		"subject":       map[string]any{"id": "capmesh-audit", "type": "service"},
		"payload":       payload,
		"requested_at":  chp.FormatTime(a.now()),
	}
	if corr != "" {
		env["correlation"] = map[string]any{"correlation_id": corr}
	}
	cctx, cancel := context.WithTimeout(ctx, a.o.probeTimeout())
	defer cancel()
	inv.raw, inv.err = a.t.invoke(cctx, env)
	if inv.err == nil {
		var res chp.InvocationResult
		if err := json.Unmarshal(inv.raw, &res); err != nil {
			inv.err = fmt.Errorf("result is not an InvocationResult: %v", err)
		} else {
			inv.res = &res
		}
	}
	return inv
}

func (a *chpAudit) replay(ctx context.Context, corr string) ([]event, *chp.ReplayResult, error) {
	cctx, cancel := context.WithTimeout(ctx, a.o.probeTimeout())
	defer cancel()
	raw, err := a.t.replay(cctx, map[string]any{"correlation_id": corr})
	if err != nil {
		return nil, nil, err
	}
	var rr chp.ReplayResult
	if err := json.Unmarshal(raw, &rr); err != nil {
		return nil, nil, fmt.Errorf("replay result: %v", err)
	}
	evs := make([]event, 0, len(rr.Events))
	for i, e := range rr.Events {
		var ev event
		if err := json.Unmarshal(e, &ev); err != nil {
			return nil, &rr, fmt.Errorf("replay event %d: %v", i, err)
		}
		evs = append(evs, ev)
	}
	return evs, &rr, nil
}

// auditCHP runs CHP v0.1 §11 against a host that answered describe: every
// requirement of chpChecklist, in order.
func auditCHP(ctx context.Context, t chpTransport, descRaw json.RawMessage, o *Options) ([]Check, *CHPSummary) {
	a := &chpAudit{t: t, o: o, corr: randomID("capmesh-audit-corr-"), now: time.Now, descRaw: descRaw}
	sum := &CHPSummary{Binding: t.binding()}
	if a.descErr = json.Unmarshal(descRaw, &a.desc); a.descErr == nil {
		sum.HostID = a.desc.ID
	}
	out := make([]Check, 0, len(chpChecklist))
	for _, q := range chpChecklist {
		st, reason := q.check(ctx, a)
		out = append(out, Check{Suite: SuiteCHP, ID: q.id, Requirement: q.requirement, Source: q.source, Status: st, Reason: reason})
		switch {
		case st == Fail:
			sum.Failed++
		case st == Pass && !q.extra:
			sum.Passed++
		}
	}
	return out, sum
}

// 1. Declaration.
func checkCHPDeclaration(_ context.Context, a *chpAudit) (Status, string) {
	if a.descErr != nil {
		return Fail, fmt.Sprintf("host descriptor does not decode: %v", a.descErr)
	}
	switch err := schema.Validate("host-descriptor", a.descRaw); {
	case err != nil:
		return Fail, "host descriptor violates host-descriptor.schema.json: " + firstLine(err)
	case len(a.desc.Capabilities) == 0:
		return Fail, "the host declares no capabilities"
	}
	return Pass, ""
}

// 2. Discovery.
func checkCHPDiscovery(ctx context.Context, a *chpAudit) (Status, string) {
	caps, err := a.t.capabilities(ctx)
	if err != nil {
		return Fail, err.Error()
	}
	var listed []chp.CapabilityDescriptor
	if err := json.Unmarshal(caps, &listed); err != nil {
		return Fail, fmt.Sprintf("capabilities are not CapabilityDescriptors: %v", err)
	}
	if missing := missingIDs(a.desc.Capabilities, listed); len(missing) > 0 {
		return Fail, "declared but not discoverable: " + strings.Join(missing, ", ")
	}
	return Pass, ""
}

// exercise makes the audit's invocations and replays their correlation,
// once: the checks from CHP.3 on read what came back.
func (a *chpAudit) exercise(ctx context.Context) {
	if a.exercised {
		return
	}
	a.exercised = true
	a.invokeAll(ctx)
	a.events, a.rr, a.rerr = a.replay(ctx, a.corr)
}

// invokeAll makes the invocations, all on one correlation so that replay
// has several: a success and a failure (the conformance fixtures, else the
// candidates), a denial, a skip, and one without a correlation.
func (a *chpAudit) invokeAll(ctx context.Context) {
	if a.declares("conformance.echo") {
		a.success = a.invoke(ctx, "conformance.echo", map[string]any{"value": "capmesh-audit"}, a.corr)
		a.invs = append(a.invs, a.success)
	}
	if a.declares("conformance.fail") {
		a.failure = a.invoke(ctx, "conformance.fail", map[string]any{}, a.corr)
		a.invs = append(a.invs, a.failure)
	}
	if a.success == nil || a.failure == nil {
		a.invokeCandidates(ctx)
	}
	a.denied = a.invoke(ctx, "capmesh_audit.no_such_capability", map[string]any{}, a.corr)
	a.invs = append(a.invs, a.denied)
	for _, c := range a.desc.Capabilities {
		if c.Disabled() || contains(a.o.CHPDisabled, c.ID) {
			a.skipped = a.invoke(ctx, c.ID, map[string]any{}, a.corr)
			a.invs = append(a.invs, a.skipped)
			break
		}
	}
	if a.skipped == nil {
		// A skip seen while looking for a success or a failure will do.
		for _, inv := range a.invs {
			if inv.res != nil && inv.res.Outcome == chp.OutcomeSkipped {
				a.skipped = inv
				break
			}
		}
	}
	// One without a correlation: the host must generate one.
	genCap := a.denied.capability
	if a.success != nil {
		genCap = a.success.capability
	}
	a.generated = a.invoke(ctx, genCap, map[string]any{"value": "capmesh-audit"}, "")
}

// declares reports whether the host declares the capability id.
func (a *chpAudit) declares(id string) bool {
	for i := range a.desc.Capabilities {
		if a.desc.Capabilities[i].ID == id {
			return true
		}
	}
	return false
}

// invokeCandidates invokes candidates with an empty payload until both a
// success and a failure are found.
func (a *chpAudit) invokeCandidates(ctx context.Context) {
	for _, c := range candidates(a.desc.Capabilities, a.o.CHPInvokeLimit) {
		inv := a.invoke(ctx, c.ID, map[string]any{}, a.corr)
		a.invs = append(a.invs, inv)
		if inv.res == nil {
			continue
		}
		if a.success == nil && inv.res.Outcome == chp.OutcomeSuccess {
			a.success = inv
		}
		if a.failure == nil && inv.res.Outcome == chp.OutcomeFailure {
			a.failure = inv
		}
		if a.success != nil && a.failure != nil {
			break
		}
	}
}

// evFor returns the replayed events of one invocation by sequence: an
// out-of-order replay is CHP.8's failure, not the evidence checks'.
func (a *chpAudit) evFor(inv *invocation) []event {
	var out []event
	for _, e := range a.events {
		if e.InvocationID == inv.id {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, _ := out[i].Sequence.Int64()
		b, _ := out[j].Sequence.Int64()
		return a < b
	})
	return out
}

// 3. Envelope boundary: every processed outcome is a valid result.
func checkCHPEnvelope(ctx context.Context, a *chpAudit) (Status, string) {
	a.exercise(ctx)
	var bad []string
	for _, inv := range append(a.invs, a.generated) {
		switch {
		case inv.err != nil:
			bad = append(bad, fmt.Sprintf("%s: %v", inv.capability, inv.err))
		case schema.Validate("invocation-result", inv.raw) != nil:
			bad = append(bad, fmt.Sprintf("%s: result violates invocation-result.schema.json: %s", inv.capability, firstLine(schema.Validate("invocation-result", inv.raw))))
		case inv.res.InvocationID != inv.id:
			bad = append(bad, fmt.Sprintf("%s: invocation_id %q, sent %q", inv.capability, inv.res.InvocationID, inv.id))
		case inv.res.Success != (inv.res.Outcome == chp.OutcomeSuccess):
			bad = append(bad, fmt.Sprintf("%s: success=%v with outcome %s", inv.capability, inv.res.Success, inv.res.Outcome))
		}
	}
	return failIfAny(bad)
}

// failIfAny fails with the problems found, or passes when there are none.
func failIfAny(bad []string) (Status, string) {
	if len(bad) > 0 {
		return Fail, strings.Join(bad, "; ")
	}
	return Pass, ""
}

// 4. Correlation.
func checkCHPCorrelation(ctx context.Context, a *chpAudit) (Status, string) {
	a.exercise(ctx)
	var bad []string
	for _, inv := range a.invs {
		if inv.res != nil && inv.res.Correlation.CorrelationID != a.corr {
			bad = append(bad, fmt.Sprintf("%s returned correlation %q, sent %q", inv.capability, inv.res.Correlation.CorrelationID, a.corr))
		}
	}
	for _, e := range a.events {
		if e.Correlation.CorrelationID != a.corr {
			bad = append(bad, fmt.Sprintf("event %s (seq %s) carries correlation %q", e.EventType, e.Sequence, e.Correlation.CorrelationID))
			break
		}
	}
	switch g := a.generated; {
	case g.res == nil:
		bad = append(bad, "the invocation without a correlation got no result")
	case g.res.Correlation.CorrelationID == "":
		bad = append(bad, "no correlation_id was generated for an invocation without one")
	default:
		gev, _, err := a.replay(ctx, g.res.Correlation.CorrelationID)
		n := 0
		for _, e := range gev {
			if e.InvocationID == g.id {
				n++
			}
		}
		if err != nil || n == 0 {
			bad = append(bad, fmt.Sprintf("the generated correlation %q replays no evidence of the invocation", g.res.Correlation.CorrelationID))
		}
	}
	return failIfAny(bad)
}

// expectEvents judges the evidence of one outcome (CHP.5-7, 9): absent
// says why it is unknown when no invocation had that outcome.
func (a *chpAudit) expectEvents(inv *invocation, outcome chp.Outcome, want []string, absent string) (Status, string) {
	switch {
	case inv == nil:
		return Unknown, absent
	case inv.res == nil:
		return Fail, fmt.Sprintf("%s: no result: %v", inv.capability, inv.err)
	case inv.res.Outcome != outcome:
		return Fail, fmt.Sprintf("%s: outcome %s, want %s", inv.capability, inv.res.Outcome, outcome)
	case a.rerr != nil:
		return Unknown, fmt.Sprintf("replay failed: %v", a.rerr)
	}
	if err := inOrder(a.evFor(inv), want); err != nil {
		return Fail, fmt.Sprintf("%s: %v", inv.capability, err)
	}
	return Pass, ""
}

// 5. Evidence on success.
func checkCHPSuccess(ctx context.Context, a *chpAudit) (Status, string) {
	a.exercise(ctx)
	return a.expectEvents(a.success, chp.OutcomeSuccess, []string{chp.EventStarted, "execution_completed"},
		"no capability succeeded with an empty payload; register the conformance fixture profile (conformance.echo) to exercise this")
}

// 6. Evidence on failure.
func checkCHPFailure(ctx context.Context, a *chpAudit) (Status, string) {
	a.exercise(ctx)
	return a.expectEvents(a.failure, chp.OutcomeFailure, []string{chp.EventStarted, "execution_failed"},
		"no capability failed; register the conformance fixture profile (conformance.fail) to exercise this")
}

// 7. Evidence on denial, with a reserved code.
func checkCHPDenial(ctx context.Context, a *chpAudit) (Status, string) {
	a.exercise(ctx)
	st, reason := a.expectEvents(a.denied, chp.OutcomeDenied, []string{"execution_denied"}, "")
	if st != Pass {
		return st, reason
	}
	if d := a.denied.res.Denial; d == nil || d.Code == "" {
		return Fail, "the denial carries no DenialReason code"
	} else if d.Code != chp.CodeCapabilityNotFound {
		return Warn, fmt.Sprintf("an unknown capability was denied with code %q, not %q", d.Code, chp.CodeCapabilityNotFound)
	}
	return Pass, ""
}

// 8. Replay ordering and completeness.
func checkCHPReplay(ctx context.Context, a *chpAudit) (Status, string) {
	a.exercise(ctx)
	if a.rerr != nil {
		return Fail, fmt.Sprintf("replay by correlation failed: %v", a.rerr)
	}
	var bad []string
	var prev int64 = -1
	for i, e := range a.events {
		seq, err := e.Sequence.Int64()
		if err != nil {
			bad = append(bad, fmt.Sprintf("event %d has no integer sequence", i))
			break
		}
		if seq <= prev {
			bad = append(bad, fmt.Sprintf("events are not ordered by sequence: %d follows %d", seq, prev))
			break
		}
		prev = seq
	}
	if a.rr.EventCount != len(a.events) {
		bad = append(bad, fmt.Sprintf("event_count %d but %d events", a.rr.EventCount, len(a.events)))
	}
	if a.rr.CorrelationID != a.corr {
		bad = append(bad, fmt.Sprintf("correlation_id %q in the replay result", a.rr.CorrelationID))
	}
	for _, inv := range a.invs {
		if inv.res != nil && len(a.evFor(inv)) == 0 {
			bad = append(bad, fmt.Sprintf("no evidence replayed for the %s invocation", inv.capability))
		}
	}
	return failIfAny(bad)
}

// 9. Skipped execution, where the host has a disabled capability.
func checkCHPSkipped(ctx context.Context, a *chpAudit) (Status, string) {
	a.exercise(ctx)
	if a.skipped == nil {
		return Skip, fmt.Sprintf("no capability declared disabled (enabled: false, status \"disabled\" or metadata %s: false) or named with --chp-disabled; required only where the host supports them", chp.EnabledKey)
	}
	return a.expectEvents(a.skipped, chp.OutcomeSkipped, []string{"execution_skipped"}, "")
}

// checkCHPChain asks the host to verify its own chain and then verifies
// the exported bundle offline: the host's word is not taken for it.
func checkCHPChain(ctx context.Context, a *chpAudit) (Status, string) {
	cctx, cancel := context.WithTimeout(ctx, a.o.probeTimeout())
	defer cancel()
	var hostSays *bool
	if raw, err := a.t.verify(cctx, a.corr); err == nil {
		var v struct {
			Valid *bool `json:"valid"`
		}
		if json.Unmarshal(raw, &v) == nil && v.Valid != nil {
			hostSays = v.Valid
		}
	} else if !errors.Is(err, errNotOffered) {
		return Fail, "verify: " + err.Error()
	}
	raw, err := a.t.export(cctx, a.corr)
	if errors.Is(err, errNotOffered) {
		switch {
		case hostSays == nil:
			return Skip, "the host offers neither verify nor export (not required by CHP v0.1)"
		case *hostSays:
			return Pass, "the host reports the chain valid (no export to check offline)"
		}
		return Fail, "the host reports its own chain invalid"
	}
	if err != nil {
		return Fail, "export: " + err.Error()
	}
	v, err := chp.VerifyBundle(raw, nil)
	switch {
	case err != nil:
		return Fail, "exported bundle: " + err.Error()
	case !v.Valid:
		return Fail, "exported bundle does not verify offline: " + v.Reason
	case hostSays != nil && !*hostSays:
		return Fail, "the host reports its chain invalid, yet the bundle verifies"
	}
	return Pass, fmt.Sprintf("%d events, %s tier, verified offline", v.EventCount, v.Assurance)
}

// candidates picks the capabilities worth invoking with an empty payload
// to find a success and a failure: enabled, sync, lowest risk first.
func candidates(caps []chp.CapabilityDescriptor, limit int) []chp.CapabilityDescriptor {
	rank := map[string]int{"": 0, "low": 0, "medium": 1, "high": 2, "critical": 3}
	var out []chp.CapabilityDescriptor
	for _, c := range caps {
		if c.Disabled() || strings.HasPrefix(c.ID, "conformance.") {
			continue
		}
		if len(c.Modes) > 0 && !contains(c.Modes, "sync") {
			continue
		}
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool { return rank[out[i].Risk] < rank[out[j].Risk] })
	if limit <= 0 {
		limit = 8
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

func missingIDs(declared, listed []chp.CapabilityDescriptor) []string {
	have := map[string]bool{}
	for _, c := range listed {
		have[c.ID+"@"+c.Version] = true
	}
	var out []string
	for _, c := range declared {
		if !have[c.ID+"@"+c.Version] {
			out = append(out, c.ID)
		}
	}
	return out
}

// inOrder checks that events hold the wanted types, in that sequence order.
func inOrder(evs []event, want []string) error {
	if len(evs) == 0 {
		return errors.New("no evidence for this invocation")
	}
	pos := -1
	var types []string
	for _, e := range evs {
		types = append(types, e.EventType)
	}
	for _, w := range want {
		found := -1
		for i := pos + 1; i < len(evs); i++ {
			if evs[i].EventType == w {
				found = i
				break
			}
		}
		if found < 0 {
			return fmt.Errorf("evidence %v lacks %s (in order %v)", types, w, want)
		}
		pos = found
	}
	return nil
}

// firstLine condenses a (multi-line) validation error: the schema header
// line is dropped in favour of the first concrete violation.
func firstLine(err error) string {
	if err == nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	s := lines[0]
	if len(lines) > 1 {
		var detail []string
		for _, l := range lines[1:] {
			if l = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(l), "-")); l != "" {
				detail = append(detail, l)
			}
		}
		s = strings.Join(detail, "; ")
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
