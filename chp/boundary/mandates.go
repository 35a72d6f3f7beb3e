package boundary

import (
	"fmt"

	"github.com/capmesh/capmesh/canonical/govalue"
	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary/internal/evjson"
	"github.com/capmesh/capmesh/chp/boundary/mandates"
)

// Gate 5 — mandates (chp-invocation-pipeline.md §3, chp-v0.2.md §10). The
// revocations held and the uses counted are package mandates' State.

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
	opts := chp.MandateVerifyOptions{At: b.now(), Revoked: b.mandates.IsRevoked}
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
	spent, used, err := b.mandates.Count(m, env.InvocationID, opts.At)
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
			var si evjson.Subject
			if si, err = evjson.RenderSubject(raw); err == nil {
				env.Subject = raw
				inv.hdr.subject, inv.hdr.subjectC = si.Stored, si.Canon
			}
		}
	}
	if err != nil { // cannot happen for strings; never run unattributed
		return b.denial(chp.CodeMandateInvalid, "mandate subject: "+err.Error(), nil), nil
	}
	return nil, nil
}

// AcceptRevocation verifies a mandate-revocation statement and keeps it
// (mandates.State.AcceptRevocation): from its operator any; from a peer only
// the revocation of a mandate seen here under the statement's key.
func (b *Boundary) AcceptRevocation(raw []byte, byOperator bool) (*mandates.AcceptedRevocation, error) {
	return b.mandates.AcceptRevocation(raw, byOperator)
}

// Revocations returns the revocation set the host holds.
func (b *Boundary) Revocations() mandates.RevocationSet { return b.mandates.Revocations() }

// RevocationIDs returns the identifiers of the held revocation set, sorted
// (mandates.State.RevocationIDs).
func (b *Boundary) RevocationIDs() []string { return b.mandates.RevocationIDs() }

// RevocationHead is the chp-revocation-head-v1 digest of the held set.
func (b *Boundary) RevocationHead() string { return b.mandates.RevocationHead() }
