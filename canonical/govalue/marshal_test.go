package govalue

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"

	"github.com/capmesh/capmesh/canonical"
)

// TestMarshalAndHash: Marshal and SHA256Hex agree with AppendCanonical for
// every kind of input they accept, and SHA256 reports a profile's refusal.
func TestMarshalAndHash(t *testing.T) {
	type event struct {
		Type    string         `json:"event_type"`
		Seq     int            `json:"seq"`
		Payload map[string]any `json:"payload"`
		Note    string         `json:"note,omitempty"`
	}
	const want = `{"event_type": "execution_started", "payload": {"note": "caf\u00e9", "z": [1, true, null]}, "seq": 2}`
	tree, _ := canonical.Parse([]byte(`{"seq":2,"event_type":"execution_started","payload":{"z":[1,true,null],"note":"café"}}`))
	for name, in := range map[string]any{
		"struct":           event{Type: "execution_started", Seq: 2, Payload: map[string]any{"note": "café", "z": []any{1, true, nil}}},
		"map":              map[string]any{"seq": 2, "event_type": "execution_started", "payload": map[string]any{"z": []any{json.Number("1"), true, nil}, "note": "café"}},
		"raw":              json.RawMessage(`{"payload":{"note":"caf\u00e9","z":[1,true,null]},"seq":2,"event_type":"execution_started"}`),
		"canonical.Value":  tree,
		"*canonical.Value": &tree,
		"raw in map":       map[string]any{"seq": 2, "event_type": "execution_started", "payload": json.RawMessage(`{"z":[1,true,null],"note":"café"}`)},
	} {
		got, err := Marshal(canonical.ChpStableV1, in)
		if err != nil || string(got) != want {
			t.Errorf("Marshal(%s) = %s, %v\nwant %s", name, got, err, want)
		}
		sum := sha256.Sum256([]byte(want))
		h, err := SHA256Hex(canonical.ChpStableV1, in)
		if err != nil || h != hex.EncodeToString(sum[:]) {
			t.Errorf("SHA256Hex(%s) = %s, %v", name, h, err)
		}
	}
	if _, err := SHA256(canonical.ChpStableV1, map[string]any{"score": 0.5}); !errors.Is(err, canonical.ErrFloat) {
		t.Errorf("SHA256 of a float under chp-stable-v1: %v, want canonical.ErrFloat", err)
	}
}

// TestFromGoAllocations pins the direct walk's allocations on the sample
// evidence event: at most 3, as for Parse.
func TestFromGoAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	generic := sampleGeneric(t)
	FromGo(generic) // size the chunks
	if n := testing.AllocsPerRun(50, func() { FromGo(generic) }); n > 3 {
		t.Errorf("FromGo of the sample document allocates %.1f times, want at most 3", n)
	}
}

// TestSharedArraysAreIsolated: containers of one document share backing
// arrays, but an append to one can never write into another.
func TestSharedArraysAreIsolated(t *testing.T) {
	tree, err := FromGo(map[string]any{"a": []any{1.0, 2.0}, "b": []any{3.0}, "c": map[string]any{"x": 1.0}, "d": map[string]any{"y": 2.0}})
	if err != nil {
		t.Fatal(err)
	}
	num := canonical.Value{Kind: canonical.Number, Str: "99"}
	before, _ := tree.AppendJSON(nil)
	a, _ := tree.Get("a")
	_ = append(a.Arr, num)
	c, _ := tree.Get("c")
	_ = append(c.Obj, canonical.Member{Key: "z", Value: num})
	after, _ := tree.AppendJSON(nil)
	if string(before) != string(after) {
		t.Errorf("appending to one container changed another:\n%s\n%s", before, after)
	}
}
