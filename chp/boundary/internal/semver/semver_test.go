package semver

import (
	"testing"
)

// TestVersionRanges pins the range forms of chp-v0.2.md §1 (proposal 0028).
func TestVersionRanges(t *testing.T) {
	for _, c := range []struct {
		rng  string
		in   []string
		out  []string
		fail bool
	}{
		{rng: "1.0.0", in: []string{"1.0.0", "v1.0.0"}, out: []string{"1.0.1", "1.0.0-rc.1"}},
		{rng: "^1.2", in: []string{"1.2.0", "1.9.9"}, out: []string{"1.1.9", "2.0.0", "2.0.0-rc.1", "1.3.0-rc.1"}},
		{rng: "^1.2.3", in: []string{"1.2.3", "1.5.0"}, out: []string{"1.2.2", "2.0.0"}},
		{rng: "^0.2.3", in: []string{"0.2.3", "0.2.9"}, out: []string{"0.3.0"}},
		{rng: "^0.0.3", in: []string{"0.0.3"}, out: []string{"0.0.4"}},
		{rng: "^2", in: []string{"2.0.0", "2.5.1"}, out: []string{"1.0.0", "3.0.0"}},
		{rng: "~1.2.3", in: []string{"1.2.3", "1.2.9"}, out: []string{"1.3.0", "1.2.2"}},
		{rng: "~1", in: []string{"1.0.0", "1.9.0"}, out: []string{"2.0.0"}},
		{rng: ">=1.0 <2", in: []string{"1.0.0", "1.99.0"}, out: []string{"0.9.9", "2.0.0"}},
		{rng: ">= 1.0  < 2", in: []string{"1.5.0"}, out: []string{"2.0.0"}},
		{rng: "1.x", in: []string{"1.0.0", "1.7.3"}, out: []string{"2.0.0", "0.1.0"}},
		{rng: "1.2.x", in: []string{"1.2.7"}, out: []string{"1.3.0"}},
		{rng: "*", in: []string{"0.0.1", "9.9.9"}, out: []string{"1.0.0-alpha"}},
		{rng: ">1", in: []string{"2.0.0"}, out: []string{"1.9.9"}},
		{rng: "<=1.2", in: []string{"1.2.9"}, out: []string{"1.3.0"}},
		{rng: ">=1.0.0-rc.1 <1.0.0", in: []string{"1.0.0-rc.1", "1.0.0-rc.2"}, out: []string{"1.0.0-alpha", "0.9.0-rc.1"}},
		{rng: "garbage", fail: true},
		{rng: "^x.1", fail: true},
		{rng: "1.2.3.4", fail: true},
		{rng: "01.2.3", fail: true},
		{rng: ">=", fail: true},
		{rng: "", fail: true},
		{rng: "1 || 2", fail: true},
	} {
		r, err := ParseRange(c.rng)
		if (err != nil) != c.fail {
			t.Errorf("%q: err %v, want failure %v", c.rng, err, c.fail)
			continue
		}
		check := func(vs []string, want bool) {
			for _, s := range vs {
				v, err := Parse(s)
				if err != nil {
					t.Fatalf("%s: %v", s, err)
				}
				if got := r.SatisfiedBy(v); got != want {
					t.Errorf("%q satisfied by %s = %v, want %v", c.rng, s, got, want)
				}
			}
		}
		check(c.in, true)
		check(c.out, false)
	}
}

// TestSemverPrecedence: Version §11 ordering.
func TestSemverPrecedence(t *testing.T) {
	order := []string{"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "2.0.0"}
	for i := 1; i < len(order); i++ {
		a, _ := Parse(order[i-1])
		b, err := Parse(order[i])
		if err != nil || a.Compare(b) >= 0 || b.Compare(a) <= 0 {
			t.Errorf("%s < %s not holding (%v)", order[i-1], order[i], err)
		}
	}
}

// FuzzParseRange: any string parses or is refused, never panics, and a
// parsed range answers for any version.
func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"1.0.0", "^1.2", "~1.2.3", ">=1.0 <2", "1.x", "*", "^0.0.x", ">= 1.0.0-rc.1+b", "garbage", "1.2.3.4"} {
		f.Add(s, "1.2.3")
	}
	f.Fuzz(func(t *testing.T, rng, version string) {
		r, err := ParseRange(rng)
		if err != nil {
			return
		}
		if v, err := Parse(version); err == nil {
			_ = r.SatisfiedBy(v)
		}
	})
}
