package govalue

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/capmesh/capmesh/canonical"
)

// TestFromGoMatchesEncodingJSON: the direct walk and encoding/json agree on
// every value, so structs (which go through json.Marshal) and dynamic values
// (which do not) canonicalize alike.
func TestFromGoMatchesEncodingJSON(t *testing.T) {
	type inner struct {
		N  float32 `json:"n"`
		Ok bool    `json:"ok,omitempty"`
	}
	values := []any{
		nil, true, "", "café \u2028 <&>", "bad \xff utf-8 \xc3", json.Number("1.50"),
		0, -7, int8(-128), int64(math.MinInt64), uint64(math.MaxUint64), uint8(255),
		0.0, math.Copysign(0, -1), 1.0, 0.1, 1e20, 1e21, 1e-6, 1e-7, 123456789.125, 5e-324, math.MaxFloat64,
		float64(1<<53 - 1), float64(-(1<<53 - 1)), float64(1 << 53), float64(1<<53 + 2), 1e15, 4966362120192.0, -1.0, 1048576.0, 1e20 + 65536,
		float32(0.1), float32(1e21), float32(1e-7), float32(3.4e38),
		[]any{}, []any(nil), []string{"a", "b"}, []string(nil),
		map[string]any{}, map[string]any(nil), map[string]any{"b": 1, "a": []any{2.5, "x", nil}, "\xff": true},
		json.RawMessage(`{"z":1,"a":[1.0]}`), json.RawMessage(nil),
		inner{N: 0.1}, []inner{{N: 1e-7, Ok: true}}, map[string]inner{"k": {N: 2}},
		[]byte("bytes become base64"),
		// Sorted by the Go keys, then cleaned: "\xff" (U+FFFD once
		// replaced) after U+FFFE, as encoding/json writes them.
		map[string]any{"\xff": 1, "\ufffe": 2, "a": 3},
		// Every kind nested in the direct walk.
		map[string]any{
			"ints":   []any{0, -1, 99, 100, int8(-8), int16(300), int32(-70000), int64(1 << 40), uint(7), uint8(200), uint16(65535), uint32(1 << 31), uint64(1 << 63), uintptr(12)},
			"floats": []any{0.0, math.Copysign(0, -1), 1.5, 1e21, 1e-7, float32(0.1), float32(-2.5e-8)},
			"strs":   []string{"x", "bad \xc3", ""}, "nostrs": []string(nil), "nomap": map[string]any(nil), "noarr": []any(nil),
			"raw": json.RawMessage(`[1.0,{"b":2,"a":1}]`), "num": json.Number("-0.0"), "struct": inner{N: 3},
			"deep": map[string]any{"a": []any{map[string]any{"b": []any{[]any{}, map[string]any{}}}}}, "t": true, "f": false, "nil": nil,
		},
		[]any{map[string]any{"k": "v"}, []any{1, "2", 3.5}, nil, inner{N: 1}},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		values = append(values, math.Float64frombits(r.Uint64()), float32(math.Float32frombits(r.Uint32())),
			float64(r.Int64N(1<<54)-1<<53), float32(r.Int32()))
	}
	for _, v := range values {
		if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			continue
		}
		if f, ok := v.(float32); ok && (math.IsNaN(float64(f)) || math.IsInf(float64(f), 0)) {
			continue
		}
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("json.Marshal(%#v): %v", v, err)
		}
		want, err := canonical.Parse(data)
		if err != nil {
			t.Fatalf("Parse(%s): %v", data, err)
		}
		got, err := FromGo(v)
		if err != nil {
			t.Errorf("FromGo(%#v): %v", v, err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("FromGo(%#v) differs from Parse(%s) (-want +got):\n%s", v, data, diff)
		}
	}
}

func TestFromGoErrors(t *testing.T) {
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	for name, v := range map[string]any{
		"NaN":            math.NaN(),
		"+Inf":           math.Inf(1),
		"NaN in map":     map[string]any{"x": []any{math.NaN()}},
		"bad Number":     json.Number("1.2.3"),
		"cycle":          cyclic,
		"channel":        make(chan int),
		"bad RawMessage": json.RawMessage(`{"a":`),
	} {
		if _, err := FromGo(v); err == nil {
			t.Errorf("FromGo(%s) succeeded", name)
		}
	}
	_, err := FromGo(cyclic)
	if err == nil || !strings.Contains(err.Error(), "cyclic") {
		t.Errorf("cycle: %v, want a message naming the likely cycle", err)
	}
}

// TestFromGoChunksFollowTheDocument: a small document converted right
// after a large one gets chunks sized for itself, not for the large one
// (which it would keep alive).
func TestFromGoChunksFollowTheDocument(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	big := map[string]any{}
	for i := range 3000 {
		big[strconv.Itoa(i)] = []any{1.0, "x"}
	}
	small := map[string]any{"a": []any{1.0, 2.0}}
	// The least of a few tries: other goroutines of the test binary may
	// allocate between the two readings; without the cap every try takes
	// two 1024-element chunks (160 KiB).
	var before, after runtime.MemStats
	least := uint64(1 << 62)
	for range 5 {
		if _, err := FromGo(big); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&before)
		if _, err := FromGo(small); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	if least > 8<<10 {
		t.Errorf("FromGo of a 1-member map after a 3000-member one allocated %d bytes", least)
	}
}
