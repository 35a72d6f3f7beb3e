package merkle

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// benchLeaves is the benchmarks' tree size: 2^20 = 1,048,576 leaves, the
// issue's "1 M events".
const benchLeaves = 1 << 20

var benchTree = sync.OnceValue(func() *Tree { return treeOf(testLeaves(benchLeaves)) })

// timed runs op for every iteration of b with arguments from next, timing
// each call, and reports the median, 99th percentile and maximum latency
// as p50-ns, p99-ns and max-ns. The clock reads cost ~50 ns per call,
// included in the figures.
func timed(b *testing.B, next func(*rand.Rand) (uint64, uint64), op func(a, c uint64) error) {
	rng := rand.New(rand.NewPCG(5, 6))
	lat := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		a, c := next(rng)
		start := time.Now()
		err := op(a, c)
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) }
	b.ReportMetric(pct(0.50), "p50-ns")
	b.ReportMetric(pct(0.99), "p99-ns")
	b.ReportMetric(pct(1), "max-ns")
}

// randomInclusion draws a tree size uniformly from [1, 2^20] and a leaf
// below it: proofs for any historical head, not only the latest.
func randomInclusion(rng *rand.Rand) (uint64, uint64) {
	size := 1 + rng.Uint64N(benchLeaves)
	return rng.Uint64N(size), size
}

// randomConsistency draws two sizes uniformly with 1 ≤ size1 ≤ size2 ≤ 2^20.
func randomConsistency(rng *rand.Rand) (uint64, uint64) {
	a, c := 1+rng.Uint64N(benchLeaves), 1+rng.Uint64N(benchLeaves)
	return min(a, c), max(a, c)
}

// BenchmarkInclusionProof generates inclusion proofs in a tree of 2^20
// leaves: "random" over all historical sizes, "ragged" at size 2^20-1,
// whose right edge has the most partial subtrees (the worst case).
func BenchmarkInclusionProof(b *testing.B) {
	t := benchTree()
	op := func(i, s uint64) error { _, err := t.InclusionProof(i, s); return err }
	b.Run("random", func(b *testing.B) { timed(b, randomInclusion, op) })
	b.Run("ragged", func(b *testing.B) {
		timed(b, func(r *rand.Rand) (uint64, uint64) { return r.Uint64N(benchLeaves - 1), benchLeaves - 1 }, op)
	})
}

// BenchmarkConsistencyProof generates consistency proofs in a tree of 2^20
// leaves between random sizes, and from random sizes to 2^20-1.
func BenchmarkConsistencyProof(b *testing.B) {
	t := benchTree()
	op := func(s1, s2 uint64) error { _, err := t.ConsistencyProof(s1, s2); return err }
	b.Run("random", func(b *testing.B) { timed(b, randomConsistency, op) })
	b.Run("ragged", func(b *testing.B) {
		timed(b, func(r *rand.Rand) (uint64, uint64) { return 1 + r.Uint64N(benchLeaves-2), benchLeaves - 1 }, op)
	})
}

// BenchmarkRootAt computes the root of a random historical size.
func BenchmarkRootAt(b *testing.B) {
	t := benchTree()
	timed(b, randomInclusion, func(_, s uint64) error { _, err := t.RootAt(s); return err })
}

// BenchmarkVerifyInclusion verifies a random inclusion proof: what an
// offline checker pays per event.
func BenchmarkVerifyInclusion(b *testing.B) {
	t := benchTree()
	rng := rand.New(rand.NewPCG(7, 8))
	index, size := randomInclusion(rng)
	p, _ := t.InclusionProof(index, size)
	leaf, _ := t.Leaf(index)
	root, _ := t.RootAt(size)
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Verify(leaf, root); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppend appends to a growing tree: amortised one node hash per
// leaf beside the leaf itself.
func BenchmarkAppend(b *testing.B) {
	var t Tree
	leaf := LeafHash([]byte("event"))
	b.ReportAllocs()
	for b.Loop() {
		t.Append(leaf)
	}
}
