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
	edits := map[string]func(evs []any){
		"subject":            func(evs []any) { evs[0].(map[string]any)["subject"] = map[string]any{"id": "agent-b", "type": "user"} },
		"denial":             func(evs []any) { last(evs)["denial"].(map[string]any)["code"] = "budget_exceeded" },
		"error":              func(evs []any) { evs[4].(map[string]any)["error"] = nil },
		"sequence":           func(evs []any) { evs[1].(map[string]any)["sequence"] = 99 },
		"capability_version": func(evs []any) { evs[0].(map[string]any)["capability_version"] = "9.9.9" },
		"causation_id": func(evs []any) {
			evs[0].(map[string]any)["correlation"].(map[string]any)["causation_id"] = "inv-forged"
		},
	}
	for field, edit := range edits {
		t.Run(field, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(orig, &m); err != nil {
				t.Fatal(err)
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
				t.Errorf("edit of %s not detected: %+v", field, v.Checks)
			}
		})
	}
}

func last(evs []any) map[string]any { return evs[len(evs)-1].(map[string]any) }
