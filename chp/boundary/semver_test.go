package boundary

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/evidence"
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
		r, err := parseRange(c.rng)
		if (err != nil) != c.fail {
			t.Errorf("%q: err %v, want failure %v", c.rng, err, c.fail)
			continue
		}
		check := func(vs []string, want bool) {
			for _, s := range vs {
				v, err := parseSemver(s)
				if err != nil {
					t.Fatalf("%s: %v", s, err)
				}
				if got := r.satisfiedBy(v); got != want {
					t.Errorf("%q satisfied by %s = %v, want %v", c.rng, s, got, want)
				}
			}
		}
		check(c.in, true)
		check(c.out, false)
	}
}

// TestSemverPrecedence: semver §11 ordering.
func TestSemverPrecedence(t *testing.T) {
	order := []string{"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "2.0.0"}
	for i := 1; i < len(order); i++ {
		a, _ := parseSemver(order[i-1])
		b, err := parseSemver(order[i])
		if err != nil || a.compare(b) >= 0 || b.compare(a) <= 0 {
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
		r, err := parseRange(rng)
		if err != nil {
			return
		}
		if v, err := parseSemver(version); err == nil {
			_ = r.satisfiedBy(v)
		}
	})
}

// TestRequestedCapabilityVersion: gate 2 honours requested_capability_version
// as read from the wire — the highest satisfying version runs; no satisfying
// version, or a range that does not parse, is a capability_version_unsupported
// denial carrying requested and available.
func TestRequestedCapabilityVersion(t *testing.T) {
	b, err := New(Config{HostID: "ver-host", Store: evidence.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1.0.0", "1.4.2", "1.10.0", "2.0.0-rc.1"} {
		v := v
		if err := b.Register(Capability{Descriptor: chp.CapabilityDescriptor{ID: "kv.get", Version: v, Description: "x"},
			Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.Marshal(v) }}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Register(Capability{Descriptor: chp.CapabilityDescriptor{ID: "kv.one", Version: "1.0.0", Description: "x"},
		Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ envelope, ran, denied string }{
		{envelope: `{"capability_id":"kv.get","requested_capability_version":"^1"}`, ran: "1.10.0"},
		{envelope: `{"capability_id":"kv.get","requested_capability_version":"~1.4"}`, ran: "1.4.2"},
		{envelope: `{"capability_id":"kv.get","requested_capability_version":">=1.0 <1.4"}`, ran: "1.0.0"},
		{envelope: `{"capability_id":"kv.get","requested_capability_version":"^1","version":"1.4.2"}`, ran: "1.4.2"},
		{envelope: `{"capability_id":"kv.get","requested_capability_version":"2.0.0-rc.1"}`, ran: "2.0.0-rc.1"},
		{envelope: `{"capability_id":"kv.get","requested_capability_version":"^2"}`, denied: chp.CodeCapabilityVersionUnsupported},
		{envelope: `{"capability_id":"kv.one","requested_capability_version":"^2"}`, denied: chp.CodeCapabilityVersionUnsupported},
		{envelope: `{"capability_id":"kv.one","requested_capability_version":"no such range!"}`, denied: chp.CodeCapabilityVersionUnsupported},
		{envelope: `{"capability_id":"kv.one","requested_capability_version":"1.0.0"}`, ran: ""},
		{envelope: `{"capability_id":"kv.nope","requested_capability_version":"^1"}`, denied: chp.CodeCapabilityNotFound},
		{envelope: `{"capability_id":"kv.get"}`, denied: chp.CodeCapabilityNotFound}, // several versions, none named
	} {
		env, err := chp.ParseEnvelope([]byte(c.envelope))
		if err != nil {
			t.Fatal(err)
		}
		res, err := b.Invoke(context.Background(), env)
		if err != nil {
			t.Fatal(err)
		}
		if c.denied != "" {
			if res.Outcome != chp.OutcomeDenied || res.Denial.Code != c.denied {
				t.Errorf("%s: outcome %s %+v, want denied %s", c.envelope, res.Outcome, res.Denial, c.denied)
				continue
			}
			if c.denied == chp.CodeCapabilityVersionUnsupported {
				var d struct {
					Requested string   `json:"requested"`
					Available []string `json:"available"`
				}
				if err := json.Unmarshal(res.Denial.Details, &d); err != nil || d.Requested == "" || len(d.Available) == 0 || res.Denial.Retryable {
					t.Errorf("%s: details %s (%v)", c.envelope, res.Denial.Details, err)
				}
			}
			continue
		}
		if res.Outcome != chp.OutcomeSuccess {
			t.Errorf("%s: %s %+v", c.envelope, res.Outcome, res.Denial)
			continue
		}
		if c.ran != "" && (string(res.Data) != `"`+c.ran+`"` || *res.CapabilityVersion != c.ran) {
			t.Errorf("%s: ran %s (version %s), want %s", c.envelope, res.Data, *res.CapabilityVersion, c.ran)
		}
	}
}
