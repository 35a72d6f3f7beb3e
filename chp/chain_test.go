package chp

import (
	"encoding/json"
	"strings"
	"testing"
)

// chainOf returns the events of a reference bundle as a store would return
// them, the recorded hashes taken from the events themselves.
func chainOf(t *testing.T, file string) []StoredEvent {
	t.Helper()
	var b struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(readSpec(t, file), &b); err != nil {
		t.Fatal(err)
	}
	var out []StoredEvent
	for i, raw := range b.Events {
		var ev struct {
			ContentHash string  `json:"content_hash"`
			PrevHash    *string `json:"prev_hash"`
		}
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		r := StoredEvent{Sequence: uint64(i + 1), Data: raw, ContentHash: ev.ContentHash}
		if ev.PrevHash != nil {
			r.PrevHash = *ev.PrevHash
		}
		out = append(out, r)
	}
	return out
}

// TestVerifyChain: the reference chains verify; an edit of an event, of a
// hash the store recorded, or a dropped link is reported at its sequence.
func TestVerifyChain(t *testing.T) {
	for _, file := range []string{"vectors/signed-bundle.json", "vectors/governance-bundle.json",
		"recorded/export-bundle.python-reference-host.hash-chain.json"} {
		evs := chainOf(t, file)
		if v := VerifyChain("c", evs); !v.Valid || v.VerifiedCount != len(evs) || v.FirstBrokenSequence != nil {
			t.Errorf("%s: %+v", file, v)
		}
	}
	for name, edit := range map[string]func([]StoredEvent){
		"payload edited": func(e []StoredEvent) {
			e[1].Data = []byte(strings.Replace(string(e[1].Data), `"payload": {`, `"payload": {"x": 1, `, 1))
		},
		"store hash":   func(e []StoredEvent) { e[1].ContentHash = strings.Repeat("0", 64) },
		"store link":   func(e []StoredEvent) { e[1].PrevHash = "" },
		"not json":     func(e []StoredEvent) { e[1].Data = []byte("{") },
		"no hash":      func(e []StoredEvent) { e[1].Data = []byte(`{"event_type":"x"}`) },
		"dropped link": func(e []StoredEvent) { copy(e[1:], e[2:]); e[len(e)-1] = e[len(e)-2] },
	} {
		evs := chainOf(t, "vectors/governance-bundle.json")
		if len(evs) < 3 {
			t.Fatalf("governance bundle has %d events", len(evs))
		}
		edit(evs)
		v := VerifyChain("c", evs)
		if v.Valid || v.FirstBrokenSequence == nil || *v.FirstBrokenSequence != evs[1].Sequence || len(v.Problems) == 0 {
			t.Errorf("%s: %+v", name, v)
		}
	}
}
