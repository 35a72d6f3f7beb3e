package canonical

import (
	"crypto/sha256"
	"encoding/json"
	"os"
	"testing"

	"github.com/capmesh/capmesh/internal/interleave"
)

// sampleDoc is a ~2 KB CHP-like evidence event: nested objects and arrays,
// unsorted keys, non-ASCII text, integers only (so every profile accepts
// it). Package govalue's benchmarks read it too.
var sampleDoc = func() []byte {
	b, err := os.ReadFile("testdata/bench/event.json")
	if err != nil {
		panic(err)
	}
	return b
}()

// sampleFloatDoc is sampleDoc's shape with fractional numbers, for the
// profiles that write floats.
var sampleFloatDoc = []byte(`{"metrics": {"score": 0.875, "latency_ms": 12.5, "ratio": 1e-05, "big": 1.5e+300, "one": 1.0},
  "weights": [0.1, 0.2, 0.30000000000000004, 1e21, 123456.789], "name": "Zoë", "n": 42}`)

func benchDocs(b testing.TB) (Value, any) {
	v, err := Parse(sampleDoc)
	if err != nil {
		b.Fatal(err)
	}
	var generic any
	if err := json.Unmarshal(sampleDoc, &generic); err != nil {
		b.Fatal(err)
	}
	return v, generic
}

// BenchmarkFloor is the comparison point: encoding/json Marshal of the same
// document (as the map[string]any json.Unmarshal gives, so keys are sorted
// too) plus SHA-256.
func BenchmarkFloor(b *testing.B) {
	_, generic := benchDocs(b)
	b.SetBytes(int64(len(sampleDoc)))
	b.ReportAllocs()
	for b.Loop() {
		out, err := json.Marshal(generic)
		if err != nil {
			b.Fatal(err)
		}
		_ = sha256.Sum256(out)
	}
}

// BenchmarkCanonicalHash is canonicalize + SHA-256 of the parsed tree: the
// evidence hot path, where the event is already a Value.
func BenchmarkCanonicalHash(b *testing.B) {
	v, _ := benchDocs(b)
	for _, p := range []Profile{ChpStableV1, Genesis, JCS, ChpJcsV1} {
		b.Run(p.Name(), func(b *testing.B) {
			b.SetBytes(int64(len(sampleDoc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := HashValue(p, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseCanonicalHash starts from JSON text: Parse + canonicalize +
// SHA-256 (what verifying a received document costs).
func BenchmarkParseCanonicalHash(b *testing.B) {
	for _, p := range []Profile{ChpStableV1, Genesis, JCS, ChpJcsV1} {
		b.Run(p.Name(), func(b *testing.B) {
			b.SetBytes(int64(len(sampleDoc)))
			b.ReportAllocs()
			for b.Loop() {
				v, err := Parse(sampleDoc)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := HashValue(p, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFloats measures the number paths (Python repr, ECMAScript).
func BenchmarkFloats(b *testing.B) {
	v, err := Parse(sampleFloatDoc)
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range []Profile{Genesis, JCS} {
		b.Run(p.Name(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := HashValue(p, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	b.SetBytes(int64(len(sampleDoc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(sampleDoc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVsFloor runs the floor and a candidate alternately, in blocks
// of 16 calls each (see alternate), and reports the median per-call time
// of each (floor_ns, canon_ns) and their ratio (x_floor). On a shared,
// loaded machine the load then falls on both alike, and medians ignore
// the blocks a preemption landed in.
func BenchmarkVsFloor(b *testing.B) {
	v, generic := benchDocs(b)
	floor := func() {
		out, err := json.Marshal(generic)
		if err != nil {
			b.Fatal(err)
		}
		_ = sha256.Sum256(out)
	}
	for _, p := range []Profile{ChpStableV1, Genesis, JCS, ChpJcsV1} {
		for _, c := range []struct {
			name string
			run  func()
		}{
			{"value", func() { HashValue(p, v) }},
			{"text", func() {
				tv, err := Parse(sampleDoc)
				if err != nil {
					b.Fatal(err)
				}
				HashValue(p, tv)
			}},
		} {
			b.Run(p.Name()+"/"+c.name, func(b *testing.B) {
				floorNs, candNs := interleave.Medians(b, floor, c.run)
				b.ReportMetric(floorNs, "floor_ns/op")
				b.ReportMetric(candNs, "canon_ns/op")
				b.ReportMetric(candNs/floorNs, "x_floor")
			})
		}
	}
}
