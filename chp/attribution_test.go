package chp

import (
	"encoding/json"
	"testing"

	"github.com/capmesh/capmesh/canonical/govalue"
)

// legacyBundle is a one-event hash-chain bundle as capmesh sealed it before
// attribution moved into the event id: the subject and the rest bound only
// by payload[BindKey]. withhold replaces the payload with the §14 marker;
// forge edits the subject after sealing.
func legacyBundle(t *testing.T, withhold, forge bool) []byte {
	t.Helper()
	subject := map[string]any{"id": "alice", "type": "user"}
	sv, _ := govalue.FromGo(subject)
	sd, err := MemberDigest(sv)
	if err != nil {
		t.Fatal(err)
	}
	payload := map[string]any{BindKey: map[string]any{"v": 1, "capability_version": "1.0.0", "causation_id": nil,
		"denial": nil, "error": nil, "sequence": 1, "subject": sd}}
	pj, _ := json.Marshal(payload)
	commit, err := PayloadCommitment(pj)
	if err != nil {
		t.Fatal(err)
	}
	ev := map[string]any{"capability_id": "kv.get", "capability_version": "1.0.0", "correlation": map[string]any{"correlation_id": "c", "causation_id": nil},
		"denial": nil, "error": nil, "event_id": "evt_legacy", "event_type": EventStarted, "hash_scheme": EventHashV2, "host_id": "h",
		"invocation_id": "inv", "outcome": nil, "payload": payload, "payload_commitment": commit, "prev_hash": nil,
		"sequence": 1, "subject": subject, "timestamp": "2026-01-01T00:00:00Z"}
	raw, _ := json.Marshal(ev)
	h, err := EventContentHash(raw, "")
	if err != nil {
		t.Fatal(err)
	}
	ev["content_hash"] = h
	if withhold {
		ev["payload"] = map[string]any{"chp_withheld": true}
	}
	if forge {
		ev["subject"] = map[string]any{"id": "mallory", "type": "user"}
	}
	b, _ := json.Marshal(map[string]any{"assurance": "hash-chain", "host_id": "h", "root_hash": RootHash([]string{h}), "events": []any{ev}})
	return b
}

// TestLegacyPayloadBinding: an event bound only inside its payload is
// reported bound-in-payload (with a warning) while the payload is disclosed,
// unbound once it is withheld, and an edit of a disclosed event fails.
func TestLegacyPayloadBinding(t *testing.T) {
	for _, c := range []struct {
		name            string
		withhold, forge bool
		valid           bool
		attribution     string
	}{
		{"disclosed", false, false, true, AttributionPayload},
		{"withheld", true, false, true, AttributionUnbound},
		{"forged disclosed", false, true, false, AttributionMismatch},
		// The gap the event-id binding closes: nothing can tell.
		{"forged withheld", true, true, true, AttributionUnbound},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := VerifyBundle(legacyBundle(t, c.withhold, c.forge), nil)
			if err != nil {
				t.Fatal(err)
			}
			if v.Valid != c.valid || len(v.Attribution) != 1 || v.Attribution[0].Attribution != c.attribution {
				t.Fatalf("valid %v attribution %+v, want %v %s; checks %+v", v.Valid, v.Attribution, c.valid, c.attribution, v.Checks)
			}
			if c.valid && len(v.Warnings) == 0 {
				t.Errorf("no warning for %s attribution", c.attribution)
			}
		})
	}
}
