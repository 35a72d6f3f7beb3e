package chp

import (
	"encoding/json"

	"github.com/capmesh/capmesh/evidence"
)

// pendingEvent turns one event into a store record. Everything that does not
// depend on the store's placement is computed here, outside the store lock;
// the Seal closure only adds the sequence (which the field binding covers),
// the payload commitment and the chain link.
func (b *Boundary) pendingEvent(inv *invocation, id string, e evt) evidence.Pending {
	env := inv.env
	capID := env.CapabilityID
	if inv.cap != nil {
		capID = inv.cap.desc.ID
	}
	if capID == "" {
		// The schema requires a non-empty capability_id on events; an
		// invocation that named none is recorded under this marker
		// (docs/DECISIONS.md).
		capID = "<missing>"
	}
	ev := EvidenceEvent{
		Assurance:         DefaultAssurance(),
		CapabilityID:      capID,
		CapabilityVersion: inv.version,
		Correlation:       env.Correlation,
		Denial:            e.denial,
		Error:             e.err,
		EventID:           id,
		EventType:         e.typ,
		HashScheme:        EventHashV2,
		HostID:            b.cfg.HostID,
		InvocationID:      env.InvocationID,
		Redacted:          true,
		Subject:           env.Subject,
		Timestamp:         FormatTime(b.now()),
	}
	if e.outcome != "" {
		o := e.outcome
		ev.Outcome = &o
	}
	payload := e.payload
	if payload == nil {
		payload = map[string]any{}
	}
	// Digests of the members the upstream hash leaves out, computed now.
	bind := map[string]any{"v": bindVersion}
	bind["subject"], _ = fieldDigest(json.RawMessage(env.Subject))
	if e.denial != nil {
		raw, _ := json.Marshal(e.denial)
		bind["denial"], _ = fieldDigest(json.RawMessage(raw))
	} else {
		bind["denial"] = nil
	}
	if e.err != nil {
		raw, _ := json.Marshal(e.err)
		bind["error"], _ = fieldDigest(json.RawMessage(raw))
	} else {
		bind["error"] = nil
	}
	bind["capability_version"] = nilOr(inv.version)
	bind["causation_id"] = nilOr(env.Correlation.CausationID)
	payload[BindKey] = bind
	corrID := env.Correlation.CorrelationID
	st := stableEvent{
		CapabilityID: &ev.CapabilityID, CorrelationID: &corrID, EventID: &ev.EventID,
		EventType: &ev.EventType, HostID: &ev.HostID, InvocationID: &ev.InvocationID,
		Timestamp: &ev.Timestamp, V2: true,
	}
	if ev.Outcome != nil {
		o := string(*ev.Outcome)
		st.Outcome = &o
	}
	return evidence.Pending{
		CorrelationID: corrID,
		EventType:     e.typ,
		Seal: func(seq uint64, prev string) (string, []byte, error) {
			bind["sequence"] = seq
			canon, err := stableCanon(make([]byte, 0, 512), payload, true)
			if err != nil {
				return "", nil, err
			}
			commitment := sha256Hex(canon)
			st.Commitment = &commitment
			hash := st.contentHash(prev)
			ev.Sequence = seq
			ev.Payload = canonToCompact(canon)
			ev.PayloadCommitment = commitment
			ev.ContentHash = &hash
			if prev != "" {
				p := prev
				ev.PrevHash = &p
			}
			data, err := json.Marshal(&ev)
			return hash, data, err
		},
	}
}

// canonToCompact returns a JSON encoding of the canonical payload. The
// canonical form is valid JSON already; encoding/json compacts RawMessage
// members when marshalling the event.
func canonToCompact(canon []byte) json.RawMessage { return json.RawMessage(canon) }
