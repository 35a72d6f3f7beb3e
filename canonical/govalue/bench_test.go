package govalue

import (
	"crypto/sha256"
	"encoding/json"
	"os"
	"testing"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/internal/interleave"
)

// sampleDoc is package canonical's ~2 KB CHP-like evidence event.
var sampleDoc = func() []byte {
	b, err := os.ReadFile("../testdata/bench/event.json")
	if err != nil {
		panic(err)
	}
	return b
}()

// sampleGeneric is sampleDoc as json.Unmarshal decodes it.
func sampleGeneric(tb testing.TB) any {
	var generic any
	if err := json.Unmarshal(sampleDoc, &generic); err != nil {
		tb.Fatal(err)
	}
	return generic
}

// BenchmarkGoCanonicalHash starts from the same Go value as the floor:
// FromGo + canonicalize + SHA-256.
func BenchmarkGoCanonicalHash(b *testing.B) {
	generic := sampleGeneric(b)
	for _, p := range []canonical.Profile{canonical.ChpStableV1, canonical.JCS} {
		b.Run(p.Name(), func(b *testing.B) {
			b.SetBytes(int64(len(sampleDoc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := SHA256(p, generic); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVsFloor runs canonical's floor (encoding/json Marshal of the
// same Go value + SHA-256) and SHA256 of the Go value alternately (see
// package interleave), and reports the median per-call time of each
// (floor_ns, canon_ns) and their ratio (x_floor).
func BenchmarkVsFloor(b *testing.B) {
	generic := sampleGeneric(b)
	floor := func() {
		out, err := json.Marshal(generic)
		if err != nil {
			b.Fatal(err)
		}
		_ = sha256.Sum256(out)
	}
	for _, p := range []canonical.Profile{canonical.ChpStableV1, canonical.Genesis, canonical.JCS, canonical.ChpJcsV1} {
		b.Run(p.Name()+"/go", func(b *testing.B) {
			floorNs, candNs := interleave.Medians(b, floor, func() { SHA256(p, generic) })
			b.ReportMetric(floorNs, "floor_ns/op")
			b.ReportMetric(candNs, "canon_ns/op")
			b.ReportMetric(candNs/floorNs, "x_floor")
		})
	}
}

// BenchmarkFromGo converts the sample document, as the map[string]any
// json.Unmarshal gives, to a tree: directly (FromGo), and through
// encoding/json and canonical.Parse (the alternative FromGo could have taken).
func BenchmarkFromGo(b *testing.B) {
	generic := sampleGeneric(b)
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := FromGo(generic); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("marshal-parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			data, err := json.Marshal(generic)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := canonical.Parse(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
