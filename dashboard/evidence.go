package dashboard

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/capmesh/capmesh/chp"
)

// evidenceView is the evidence page's data: the timeline of one
// correlation with each event's chain step, and the bundle's checks.
type evidenceView struct {
	Correlation string
	Error       string
	SignIn      bool // the node wants a key
	// Valid is the dashboard's own verdict (chp.VerifyBundle on the
	// node's export); NodeVerdict what the node's chp.verify says.
	Valid       bool
	Reason      string
	NodeVerdict string
	HostID      string
	Assurance   string
	KeyID       string
	Events      []eventStep
	Checks      []chp.BundleCheck
	Warnings    []string
}

// eventStep is one event of the timeline and its chain verification.
type eventStep struct {
	Sequence    uint64
	Timestamp   string
	Type        string
	Capability  string
	Outcome     string
	Denial      string
	PrevHash    string
	ContentHash string
	// Links: prev_hash equals the previous event's content_hash (the
	// empty hash for the first). Recomputed: the event's content hash
	// recomputes (with its payload commitment and attribution binding).
	Links      bool
	Recomputed bool
	Problem    string
	OK         bool
}

// verifyEvidence verifies an exported bundle as an offline verifier would
// (chp.VerifyBundle) and walks its chain event by event (chp.VerifyChain),
// so the page shows which step holds and where a chain breaks. Nothing
// the node claims is shown as verified unless it recomputes here.
func verifyEvidence(corr string, bundle []byte) *evidenceView {
	v := &evidenceView{Correlation: corr}
	bv, err := chp.VerifyBundle(bundle, nil)
	if err != nil {
		v.Error = "the node's export is not a bundle: " + err.Error()
		return v
	}
	v.Valid, v.Reason, v.HostID, v.Assurance, v.KeyID = bv.Valid, bv.Reason, bv.HostID, bv.Assurance, bv.KeyID
	v.Checks, v.Warnings = bv.Checks, bv.Warnings
	var b struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(bundle, &b); err != nil {
		v.Valid = false
		v.Error = "the node's export is not a bundle: " + err.Error()
		return v
	}
	stored := make([]chp.StoredEvent, 0, len(b.Events))
	prev := ""
	for _, raw := range b.Events {
		var ev chp.EvidenceEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			v.Events = append(v.Events, eventStep{Problem: "undecodable event: " + err.Error()})
			continue
		}
		s := eventStep{Sequence: ev.Sequence, Timestamp: ev.Timestamp, Type: ev.EventType, Capability: ev.CapabilityID,
			PrevHash: deref(ev.PrevHash), ContentHash: deref(ev.ContentHash)}
		if ev.Outcome != nil {
			s.Outcome = string(*ev.Outcome)
		}
		if ev.Denial != nil {
			s.Denial = ev.Denial.Code
		}
		s.Links = s.PrevHash == prev
		prev = s.ContentHash
		v.Events = append(v.Events, s)
		stored = append(stored, chp.StoredEvent{Sequence: ev.Sequence, Data: raw, ContentHash: s.ContentHash, PrevHash: s.PrevHash})
	}
	chain := chp.VerifyChain(corr, stored)
	for i := range v.Events {
		s := &v.Events[i]
		if s.Problem != "" {
			continue
		}
		prefix := fmt.Sprintf("sequence %d: ", s.Sequence)
		for _, p := range chain.Problems {
			if strings.HasPrefix(p, prefix) {
				s.Problem = strings.TrimPrefix(p, prefix)
				break
			}
		}
		s.Recomputed = s.Problem == "" || (s.Links && !strings.Contains(s.Problem, "content_hash") && !strings.Contains(s.Problem, "payload"))
		s.OK = s.Problem == "" && s.Links
	}
	if !chain.Valid {
		v.Valid = false
		if v.Reason == "" {
			v.Reason = chain.Reason
		}
	}
	return v
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
