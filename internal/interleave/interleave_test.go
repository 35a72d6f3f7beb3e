package interleave

import (
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 3}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestMediansOrdersCost: a candidate that sleeps measures slower than a
// floor that does nothing.
func TestMediansOrdersCost(t *testing.T) {
	var floor, cand float64
	testing.Benchmark(func(b *testing.B) {
		floor, cand = Medians(b, func() {}, func() { time.Sleep(10 * time.Microsecond) })
	})
	if !(cand > floor) || cand < 10_000 {
		t.Fatalf("floor %v ns, candidate %v ns: want the sleeping candidate slower and ≥ 10 µs", floor, cand)
	}
}
