package boundary

import (
	"fmt"
	"sync"
	"time"

	"github.com/capmesh/capmesh/canonical/govalue"
	"github.com/capmesh/capmesh/chp"
)

// Gate 5 — mandates (chp-invocation-pipeline.md §3, chp-v0.2.md §10).

// mandateState is a Boundary's mandate bookkeeping: the verified mandate
// revocations it holds (revocations.go) and the uses counted against capped
// mandates. The zero value is ready; load fills it from a sidecar file.
type mandateState struct {
	mu      sync.Mutex
	revoked map[mandateKey]struct{}
	served  [][]byte // the accepted statements, in arrival order (GET /revocations)
	path    string   // the sidecar file accepted statements are appended to ("" = memory)
	torn    bool     // the sidecar file ends without a newline

	uses     map[mandateKey]*mandateUses
	usesPath string // the file counted uses are appended to ("" = memory)
}

// mandateKey names a mandate by its id under its principal's key: the same
// id signed by another key is another mandate (the issuer-only rule).
type mandateKey struct{ id, principalKey string }

// mandateUses is the set of invocation ids counted against a capped mandate.
type mandateUses struct {
	ids   map[string]struct{}
	until time.Time // the mandate's valid_until: after it the count is moot
}

// maxTrackedMandates is how many capped mandates are counted before expired
// ones are swept.
const maxTrackedMandates = 4096

func (s *mandateState) isRevoked(id, principalKey string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.revoked[mandateKey{id, principalKey}]
	return ok
}

// count records invocationID against every capped link of m's chain — in
// the uses file too, when there is one, before it answers — or, when a
// link's cap is already spent by other invocations, records nothing and
// returns that link with its use count. The error is the uses file's.
func (s *mandateState) count(m *chp.Mandate, invocationID string, now time.Time) (spent *chp.Mandate, used int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var capped []*mandateUses
	var recs []useRecord
	for l := m; l != nil; l = l.Parent {
		if l.MaxInvocations == 0 {
			continue
		}
		k := mandateKey{l.MandateID, l.Principal.PublicKey}
		if s.uses[k] == nil && len(s.uses) >= maxTrackedMandates {
			s.sweep(now)
		}
		u := s.use(k, l.ValidUntil)
		if _, again := u.ids[invocationID]; again {
			continue
		}
		if int64(len(u.ids)) >= l.MaxInvocations {
			return l, len(u.ids), nil
		}
		capped = append(capped, u)
		recs = append(recs, useRecord{MandateID: k.id, PrincipalKey: k.principalKey, InvocationID: invocationID, Until: l.ValidUntil})
	}
	if err := s.persistUses(recs); err != nil {
		return nil, 0, fmt.Errorf("boundary: recording a mandate use: %w", err)
	}
	for _, u := range capped {
		u.ids[invocationID] = struct{}{}
	}
	return nil, 0, nil
}

// sweep drops the counts of expired mandates (s.mu held).
func (s *mandateState) sweep(now time.Time) {
	for k, u := range s.uses {
		if now.After(u.until) {
			delete(s.uses, k)
		}
	}
}

// mandateGate runs gate 5 for a presented mandate: verify (mandate_invalid),
// scope (policy_blocked), count (mandate_exhausted), then bind the
// evidence subject to the delegate acting under the mandate. A nil denial
// means the invocation proceeds under the new subject; an error, that a use
// could not be recorded (nothing ran, nothing is answered).
func (b *Boundary) mandateGate(inv *invocation) (*chp.DenialReason, error) {
	env := inv.env
	m, err := chp.ParseMandate(env.Mandate)
	if err != nil {
		return b.denial(chp.CodeMandateInvalid, err.Error(),
			map[string]any{"checks": map[string]any{"structure": false}}), nil
	}
	opts := chp.MandateVerifyOptions{At: b.now(), Revoked: b.mandates.isRevoked}
	if c := inv.ctx.caller; c != nil {
		opts.Delegate = c.ID
	}
	if v := chp.VerifyMandate(m, opts); !v.Valid {
		return b.denial(chp.CodeMandateInvalid, v.Reason,
			map[string]any{"mandate_id": m.MandateID, "checks": v.CheckMap()}), nil
	}
	if !chp.MandateScopeAllows(m.Scope, env.CapabilityID) {
		return b.denial(chp.CodePolicyBlocked,
			fmt.Sprintf("capability %q is outside mandate %s's scope", env.CapabilityID, m.MandateID),
			map[string]any{"decision": "deny", "matched_rule": "mandate_scope", "policy_version": nil,
				"explanation": "the mandate grants other capabilities", "required_next_action": nil,
				"mandate_id": m.MandateID}), nil
	}
	spent, used, err := b.mandates.count(m, env.InvocationID, opts.At)
	if err != nil {
		return nil, err
	}
	if spent != nil {
		return b.denial(chp.CodeMandateExhausted,
			fmt.Sprintf("mandate %s has been used %d of %d times", spent.MandateID, used, spent.MaxInvocations),
			map[string]any{"mandate_id": spent.MandateID, "used": used, "max_invocations": spent.MaxInvocations}), nil
	}
	subj, err := govalue.FromGo(map[string]any{
		"id": m.DelegateID, "type": "mandate", "verified": true, "mandate_id": m.MandateID,
		"principal": m.Principal.HostID, "root_principal": m.RootPrincipal(),
	})
	if err == nil {
		var raw []byte
		if raw, err = subj.AppendJSON(nil); err == nil {
			var si subjectInfo
			if si, err = renderSubject(raw); err == nil {
				env.Subject = raw
				inv.hdr.subject, inv.hdr.subjectC = si.stored, si.canon
			}
		}
	}
	if err != nil { // cannot happen for strings; never run unattributed
		return b.denial(chp.CodeMandateInvalid, "mandate subject: "+err.Error(), nil), nil
	}
	return nil, nil
}
