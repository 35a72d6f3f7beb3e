// Package interleave measures a candidate against its floor in the same
// benchmark on a shared, noisy machine: the two run alternately in short
// blocks, so both see the same load, and each is summarised by its median.
package interleave

import (
	"slices"
	"testing"
	"time"
)

// Block is how many calls of each function run back to back.
const Block = 16

// Medians runs blocks of Block calls of floor and then of cand for b.N
// iterations and returns the median per-call nanoseconds of each.
func Medians(b *testing.B, floor, cand func()) (floorNs, candNs float64) {
	var fs, cs []float64
	for b.Loop() {
		t0 := time.Now()
		for range Block {
			floor()
		}
		t1 := time.Now()
		for range Block {
			cand()
		}
		t2 := time.Now()
		fs = append(fs, float64(t1.Sub(t0))/Block)
		cs = append(cs, float64(t2.Sub(t1))/Block)
	}
	return median(fs), median(cs)
}

// median sorts xs and returns its middle element, 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}
