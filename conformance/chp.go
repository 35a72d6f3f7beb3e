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

// chpReqs are the nine requirements of CHP v0.1 §11 with the section that
// details each.
var chpReqs = []struct{ id, req, src string }{
	{"CHP.1", "capability declaration: a HostDescriptor with protocol_version and valid CapabilityDescriptors", "CHP v0.1 §3, §4, §11.1"},
	{"CHP.2", "capability discovery lists the declared capabilities", "CHP v0.1 §11.2; HTTP binding §3 (GET /capabilities)"},
	{"CHP.3", "invocation through an envelope-compatible boundary returns an InvocationResult for every processed outcome", "CHP v0.1 §5, §8, §11.3; HTTP binding §1"},
	{"CHP.4", "correlation: a caller's correlation_id is preserved, a missing one generated, both returned and in the evidence", "CHP v0.1 §5, §7, §11.4"},
	{"CHP.5", "evidence on success: execution_started then execution_completed", "CHP v0.1 §6, §8, §11.5"},
	{"CHP.6", "evidence on failure: execution_started then execution_failed", "CHP v0.1 §8, §11.6"},
	{"CHP.7", "evidence on denial: execution_denied with a stable denial code (unknown capability)", "CHP v0.1 §8, §9, §11.7"},
	{"CHP.8", "replay by correlation id returns that correlation's events ordered by sequence", "CHP v0.1 §10, §11.8"},
	{"CHP.9", "skipped execution is represented (outcome skipped, execution_skipped)", "CHP v0.1 §8, §11.9"},
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

type chpAudit struct {
	t    chpTransport
	o    *Options
	corr string
	now  func() time.Time
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

// auditCHP runs CHP v0.1 §11 against a host that answered describe.
func auditCHP(ctx context.Context, t chpTransport, descRaw json.RawMessage, o *Options) ([]Check, *CHPSummary) {
	a := &chpAudit{t: t, o: o, corr: randomID("capmesh-audit-corr-"), now: time.Now}
	res := map[string]*Check{}
	for _, r := range chpReqs {
		res[r.id] = &Check{Suite: SuiteCHP, ID: r.id, Requirement: r.req, Source: r.src, Status: Unknown}
	}
	set := func(id string, st Status, format string, args ...any) {
		c := res[id]
		// A failure is never overwritten by a later pass.
		if c.Status == Fail && st != Fail {
			return
		}
		c.Status, c.Reason = st, fmt.Sprintf(format, args...)
	}
	sum := &CHPSummary{Binding: t.binding()}

	// 1. Declaration.
	var desc chp.HostDescriptor
	if err := json.Unmarshal(descRaw, &desc); err != nil {
		set("CHP.1", Fail, "host descriptor does not decode: %v", err)
	} else {
		sum.HostID = desc.ID
		switch err := schema.Validate("host-descriptor", descRaw); {
		case err != nil:
			set("CHP.1", Fail, "host descriptor violates host-descriptor.schema.json: %s", firstLine(err))
		case len(desc.Capabilities) == 0:
			set("CHP.1", Fail, "the host declares no capabilities")
		default:
			set("CHP.1", Pass, "")
		}
	}

	// 2. Discovery.
	if caps, err := t.capabilities(ctx); err != nil {
		set("CHP.2", Fail, "%v", err)
	} else {
		var listed []chp.CapabilityDescriptor
		if err := json.Unmarshal(caps, &listed); err != nil {
			set("CHP.2", Fail, "capabilities are not CapabilityDescriptors: %v", err)
		} else if missing := missingIDs(desc.Capabilities, listed); len(missing) > 0 {
			set("CHP.2", Fail, "declared but not discoverable: %s", strings.Join(missing, ", "))
		} else {
			set("CHP.2", Pass, "")
		}
	}

	// Invocations, all on one correlation so that replay has several.
	var invs []*invocation
	byID := func(id string) *chp.CapabilityDescriptor {
		for i := range desc.Capabilities {
			if desc.Capabilities[i].ID == id {
				return &desc.Capabilities[i]
			}
		}
		return nil
	}
	var success, failure, skipped *invocation
	if byID("conformance.echo") != nil {
		success = a.invoke(ctx, "conformance.echo", map[string]any{"value": "capmesh-audit"}, a.corr)
		invs = append(invs, success)
	}
	if byID("conformance.fail") != nil {
		failure = a.invoke(ctx, "conformance.fail", map[string]any{}, a.corr)
		invs = append(invs, failure)
	}
	if success == nil || failure == nil {
		for _, c := range candidates(desc.Capabilities, a.o.CHPInvokeLimit) {
			inv := a.invoke(ctx, c.ID, map[string]any{}, a.corr)
			invs = append(invs, inv)
			if inv.res == nil {
				continue
			}
			if success == nil && inv.res.Outcome == chp.OutcomeSuccess {
				success = inv
			}
			if failure == nil && inv.res.Outcome == chp.OutcomeFailure {
				failure = inv
			}
			if success != nil && failure != nil {
				break
			}
		}
	}
	denied := a.invoke(ctx, "capmesh_audit.no_such_capability", map[string]any{}, a.corr)
	invs = append(invs, denied)
	for _, c := range desc.Capabilities {
		if c.Disabled() || contains(a.o.CHPDisabled, c.ID) {
			skipped = a.invoke(ctx, c.ID, map[string]any{}, a.corr)
			invs = append(invs, skipped)
			break
		}
	}
	if skipped == nil {
		// A skip seen while looking for a success or a failure will do.
		for _, inv := range invs {
			if inv.res != nil && inv.res.Outcome == chp.OutcomeSkipped {
				skipped = inv
				break
			}
		}
	}
	// One without a correlation: the host must generate one.
	genCap := denied.capability
	if success != nil {
		genCap = success.capability
	}
	generated := a.invoke(ctx, genCap, map[string]any{"value": "capmesh-audit"}, "")

	// 3. Envelope boundary: every processed outcome is a valid result.
	{
		var bad []string
		for _, inv := range append(invs, generated) {
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
		if len(bad) > 0 {
			set("CHP.3", Fail, "%s", strings.Join(bad, "; "))
		} else {
			set("CHP.3", Pass, "")
		}
	}

	// Replay of the audit correlation.
	events, rr, rerr := a.replay(ctx, a.corr)
	evFor := func(inv *invocation) []event {
		var out []event
		for _, e := range events {
			if e.InvocationID == inv.id {
				out = append(out, e)
			}
		}
		// By sequence: an out-of-order replay is CHP.8's failure, not the
		// evidence checks'.
		sort.SliceStable(out, func(i, j int) bool {
			a, _ := out[i].Sequence.Int64()
			b, _ := out[j].Sequence.Int64()
			return a < b
		})
		return out
	}

	// 4. Correlation.
	{
		var bad []string
		for _, inv := range invs {
			if inv.res != nil && inv.res.Correlation.CorrelationID != a.corr {
				bad = append(bad, fmt.Sprintf("%s returned correlation %q, sent %q", inv.capability, inv.res.Correlation.CorrelationID, a.corr))
			}
		}
		for _, e := range events {
			if e.Correlation.CorrelationID != a.corr {
				bad = append(bad, fmt.Sprintf("event %s (seq %s) carries correlation %q", e.EventType, e.Sequence, e.Correlation.CorrelationID))
				break
			}
		}
		switch {
		case generated.res == nil:
			bad = append(bad, "the invocation without a correlation got no result")
		case generated.res.Correlation.CorrelationID == "":
			bad = append(bad, "no correlation_id was generated for an invocation without one")
		default:
			gev, _, err := a.replay(ctx, generated.res.Correlation.CorrelationID)
			n := 0
			for _, e := range gev {
				if e.InvocationID == generated.id {
					n++
				}
			}
			if err != nil || n == 0 {
				bad = append(bad, fmt.Sprintf("the generated correlation %q replays no evidence of the invocation", generated.res.Correlation.CorrelationID))
			}
		}
		if len(bad) > 0 {
			set("CHP.4", Fail, "%s", strings.Join(bad, "; "))
		} else {
			set("CHP.4", Pass, "")
		}
	}

	// 5-7, 9. Evidence per outcome.
	expectEvents := func(id string, inv *invocation, outcome chp.Outcome, want []string, absent string) {
		switch {
		case inv == nil:
			set(id, Unknown, "%s", absent)
		case inv.res == nil:
			set(id, Fail, "%s: no result: %v", inv.capability, inv.err)
		case inv.res.Outcome != outcome:
			set(id, Fail, "%s: outcome %s, want %s", inv.capability, inv.res.Outcome, outcome)
		case rerr != nil:
			set(id, Unknown, "replay failed: %v", rerr)
		default:
			got := evFor(inv)
			if err := inOrder(got, want); err != nil {
				set(id, Fail, "%s: %v", inv.capability, err)
				return
			}
			set(id, Pass, "")
		}
	}
	expectEvents("CHP.5", success, chp.OutcomeSuccess, []string{chp.EventStarted, "execution_completed"},
		"no capability succeeded with an empty payload; register the conformance fixture profile (conformance.echo) to exercise this")
	expectEvents("CHP.6", failure, chp.OutcomeFailure, []string{chp.EventStarted, "execution_failed"},
		"no capability failed; register the conformance fixture profile (conformance.fail) to exercise this")
	expectEvents("CHP.7", denied, chp.OutcomeDenied, []string{"execution_denied"}, "")
	if res["CHP.7"].Status == Pass {
		if d := denied.res.Denial; d == nil || d.Code == "" {
			set("CHP.7", Fail, "the denial carries no DenialReason code")
		} else if d.Code != chp.CodeCapabilityNotFound {
			set("CHP.7", Warn, "an unknown capability was denied with code %q, not %q", d.Code, chp.CodeCapabilityNotFound)
		}
	}
	if skipped == nil {
		set("CHP.9", Skip, "no capability declared disabled (enabled: false, status \"disabled\" or metadata %s: false) or named with --chp-disabled; required only where the host supports them", chp.EnabledKey)
	} else {
		expectEvents("CHP.9", skipped, chp.OutcomeSkipped, []string{"execution_skipped"}, "")
	}

	// 8. Replay ordering and completeness.
	switch {
	case rerr != nil:
		set("CHP.8", Fail, "replay by correlation failed: %v", rerr)
	default:
		var bad []string
		var prev int64 = -1
		for i, e := range events {
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
		if rr.EventCount != len(events) {
			bad = append(bad, fmt.Sprintf("event_count %d but %d events", rr.EventCount, len(events)))
		}
		if rr.CorrelationID != a.corr {
			bad = append(bad, fmt.Sprintf("correlation_id %q in the replay result", rr.CorrelationID))
		}
		for _, inv := range invs {
			if inv.res != nil && len(evFor(inv)) == 0 {
				bad = append(bad, fmt.Sprintf("no evidence replayed for the %s invocation", inv.capability))
			}
		}
		if len(bad) > 0 {
			set("CHP.8", Fail, "%s", strings.Join(bad, "; "))
		} else {
			set("CHP.8", Pass, "%d events in sequence order", len(events))
			res["CHP.8"].Reason = ""
		}
	}

	out := make([]Check, 0, len(chpReqs)+1)
	for _, r := range chpReqs {
		c := *res[r.id]
		out = append(out, c)
		switch c.Status {
		case Pass:
			sum.Passed++
		case Fail:
			sum.Failed++
		}
	}
	chain := a.chain(ctx)
	if chain.Status == Fail {
		sum.Failed++
	}
	out = append(out, chain)
	return out, sum
}

// chain asks the host to verify its own chain and then verifies the
// exported bundle offline: the host's word is not taken for it.
func (a *chpAudit) chain(ctx context.Context) Check {
	ch := Check{Suite: SuiteCHP, ID: "CHP.chain", Requirement: "the evidence chain of the audit correlation verifies, by the host and offline from its export",
		Source: "CHP HTTP binding §4, §4a; chp-v0.2 §2-3 (hash chain, signed bundle)"}
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
		ch.Status, ch.Reason = Fail, "verify: "+err.Error()
		return ch
	}
	raw, err := a.t.export(cctx, a.corr)
	if errors.Is(err, errNotOffered) {
		switch {
		case hostSays == nil:
			ch.Status, ch.Reason = Skip, "the host offers neither verify nor export (not required by CHP v0.1)"
		case *hostSays:
			ch.Status, ch.Reason = Pass, "the host reports the chain valid (no export to check offline)"
		default:
			ch.Status, ch.Reason = Fail, "the host reports its own chain invalid"
		}
		return ch
	}
	if err != nil {
		ch.Status, ch.Reason = Fail, "export: "+err.Error()
		return ch
	}
	v, err := chp.VerifyBundle(raw, nil)
	switch {
	case err != nil:
		ch.Status, ch.Reason = Fail, "exported bundle: "+err.Error()
	case !v.Valid:
		ch.Status, ch.Reason = Fail, "exported bundle does not verify offline: "+v.Reason
	case hostSays != nil && !*hostSays:
		ch.Status, ch.Reason = Fail, "the host reports its chain invalid, yet the bundle verifies"
	default:
		ch.Status = Pass
		ch.Reason = fmt.Sprintf("%d events, %s tier, verified offline", v.EventCount, v.Assurance)
	}
	return ch
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
