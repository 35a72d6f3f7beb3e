package boundary

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"testing"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/evidence"
)

// TestBindingDetectsEdits edits, one at a time, each member the upstream
// event hash leaves out. The upstream checks (hashes, root, signature) still
// pass — which is the gap — and capmesh's field binding catches every edit.
func TestBindingDetectsEdits(t *testing.T) {
	seed := make([]byte, ed25519.SeedSize)
	key := ed25519.NewKeyFromSeed(seed)
	b, err := New(Config{HostID: "bind-host", Store: evidence.NewMemory(), Key: key, Policy: FixturePolicy(), Safety: FixtureSafety()})
	if err != nil {
		t.Fatal(err)
	}
	if err := RegisterFixtures(b); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cause := "inv-parent"
	for _, c := range []string{"conformance.fail", "conformance.risky"} {
		if _, err := b.Invoke(ctx, &chp.InvocationEnvelope{CapabilityID: c, Subject: json.RawMessage(`{"id":"agent-a","type":"user"}`),
			Correlation: chp.CorrelationContext{CorrelationID: "bind", CausationID: &cause}}); err != nil {
			t.Fatal(err)
		}
	}
	bundle, err := b.Export(ctx, "bind")
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := json.Marshal(bundle)
	if v, _ := chp.VerifyBundle(orig, nil); !v.Valid || v.Bound != v.EventCount {
		t.Fatalf("untouched bundle: %+v", v)
	}
	// failed event = index 4 (3 safety events, started, failed); denied = last.
	corr := func(evs []any, i int) map[string]any { return evs[i].(map[string]any)["correlation"].(map[string]any) }
	edits := map[string]func(evs []any){
		"trace_id":              func(evs []any) { corr(evs, 2)["trace_id"] = "trace-forged" },
		"baggage":               func(evs []any) { corr(evs, 2)["baggage"] = map[string]any{"tenant": "other"} },
		"environment":           func(evs []any) { corr(evs, 3)["environment"] = "staging" },
		"parent_correlation_id": func(evs []any) { corr(evs, 3)["parent_correlation_id"] = "corr-forged" },
		"redacted":              func(evs []any) { evs[1].(map[string]any)["redacted"] = false },
		"assurance":             func(evs []any) { evs[1].(map[string]any)["assurance"].(map[string]any)["level"] = "S3" },
		"added member":          func(evs []any) { evs[1].(map[string]any)["verified_by"] = "auditor" },
		"subject":               func(evs []any) { evs[0].(map[string]any)["subject"] = map[string]any{"id": "agent-b", "type": "user"} },
		"denial":                func(evs []any) { last(evs)["denial"].(map[string]any)["code"] = "budget_exceeded" },
		"error":                 func(evs []any) { evs[4].(map[string]any)["error"] = nil },
		"sequence":              func(evs []any) { evs[1].(map[string]any)["sequence"] = 99 },
		"capability_version":    func(evs []any) { evs[0].(map[string]any)["capability_version"] = "9.9.9" },
		"causation_id": func(evs []any) {
			evs[0].(map[string]any)["correlation"].(map[string]any)["causation_id"] = "inv-forged"
		},
	}
	for field, edit := range edits {
		for _, withhold := range []bool{false, true} {
			name := field
			if withhold {
				name += "/withheld"
			}
			t.Run(name, func(t *testing.T) { checkEditDetected(t, orig, edit, withhold) })
		}
	}
}

// checkEditDetected applies edit to the events of the bundle orig — after
// withholding every payload (chp-v0.2.md §14) when withhold — and requires
// the upstream checks to pass and the binding to fail.
func checkEditDetected(t *testing.T, orig []byte, edit func(evs []any), withhold bool) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(orig, &m); err != nil {
		t.Fatal(err)
	}
	if withhold {
		withholdAll(m["events"].([]any))
	}
	edit(m["events"].([]any))
	data, _ := json.Marshal(m)
	v, err := chp.VerifyBundle(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	upstreamOK := true
	var bindOK bool
	for _, c := range v.Checks {
		if c.Name == "capmesh_binding" {
			bindOK = c.OK
		} else if !c.OK {
			upstreamOK = false
		}
	}
	if !upstreamOK {
		t.Errorf("upstream checks failed too (%+v): the edit is not of an unbound member", v.Checks)
	}
	if bindOK || v.Valid {
		t.Errorf("edit not detected: %+v", v.Checks)
	}
}

// withholdAll replaces every event's payload with the §14 marker.
func withholdAll(evs []any) {
	for _, e := range evs {
		e.(map[string]any)["payload"] = map[string]any{"chp_withheld": true}
	}
}

// TestBindingSurvivesWithholding: a disclosure-minimized export (every
// payload withheld) still verifies, every event's attribution still bound;
// forging the subject of such a bundle makes it invalid. The attribution
// lives in the event id, which withholding does not touch.
func TestBindingSurvivesWithholding(t *testing.T) {
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	b, err := New(Config{HostID: "withhold-host", Store: evidence.NewMemory(), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if err := RegisterFixtures(b); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ids []string
	for _, c := range []string{"conformance.echo", "conformance.fail", "conformance.nope"} {
		res, err := b.Invoke(ctx, &chp.InvocationEnvelope{CapabilityID: c, Subject: json.RawMessage(`{"id":"alice","type":"user"}`),
			Correlation: chp.CorrelationContext{CorrelationID: "wh"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.EvidenceIDs...)
	}
	bundle, err := b.Export(ctx, "wh")
	if err != nil {
		t.Fatal(err)
	}
	// The results name the events by their final (bound) ids.
	for i, e := range bundle.Events {
		var ev struct {
			EventID string `json:"event_id"`
		}
		if err := json.Unmarshal(e, &ev); err != nil || i >= len(ids) || ev.EventID != ids[i] {
			t.Errorf("event %d: id %q, result named %q", i, ev.EventID, ids)
		}
	}
	var m map[string]any
	raw, _ := json.Marshal(bundle)
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	evs := m["events"].([]any)
	withholdAll(evs)
	minimized, _ := json.Marshal(m)
	v, err := chp.VerifyBundle(minimized, &chp.VerifyOptions{RequireSigned: true})
	if err != nil || !v.Valid || v.Bound != v.EventCount || v.Unbound != 0 || len(v.Warnings) != 0 {
		t.Fatalf("minimized bundle: %+v %v", v, err)
	}
	for _, a := range v.Attribution {
		if a.Attribution != chp.AttributionBound {
			t.Errorf("event %d: %s", a.Index, a.Attribution)
		}
	}
	// Forge who acted, and what was denied, under the withheld payloads.
	for _, e := range evs {
		ev := e.(map[string]any)
		ev["subject"] = map[string]any{"id": "mallory", "type": "user"}
		if d, ok := ev["denial"].(map[string]any); ok {
			d["code"] = "policy_blocked"
		}
	}
	forged, _ := json.Marshal(m)
	v, err = chp.VerifyBundle(forged, nil)
	if err != nil || v.Valid || v.Bound != 0 {
		t.Fatalf("forged minimized bundle verified: %+v %v", v, err)
	}
	for _, a := range v.Attribution {
		if a.Attribution != chp.AttributionMismatch {
			t.Errorf("forged event %d: %s", a.Index, a.Attribution)
		}
	}
}

func last(evs []any) map[string]any { return evs[len(evs)-1].(map[string]any) }
