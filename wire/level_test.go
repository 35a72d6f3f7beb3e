package wire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLevelRealResponses: the static level of each recorded primal, with
// the requirements it misses. Live requirements are unknown without a
// probe, so Verified stays 0.
func TestLevelRealResponses(t *testing.T) {
	tests := []struct {
		file   string
		level  int
		missed []string // IDs of failed checks
	}{
		{"rhizocrypt.capabilities.list.json", 3, nil},
		{"sweetgrass.capabilities.list.json", 3, nil},
		{"loamspine.capabilities.list.json", 2, []string{"L3.consumed"}},
		{"nestgate.capabilities.list.json", 1, []string{"L2.methods", "L3.consumed", "L3.cost", "L3.deps"}},
		{"nestgate.semantic_router.capabilities.list.json", 1, []string{"L2.methods", "L3.provided", "L3.consumed", "L3.cost", "L3.deps"}},
		{"songbird.capabilities.list.json", 1, []string{"L2.naming", "L3.cost", "L3.deps"}},
		{"songbird.capabilities.methods.json", 0, []string{"L1.parseable", "L1.method", "L2.primal", "L2.version", "L2.methods", "L2.naming", "L3.provided", "L3.consumed", "L3.cost", "L3.deps"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			c, err := Parse(resultOf(t, ecoFile(t, "real-responses/"+tt.file)))
			if err != nil {
				t.Fatal(err)
			}
			r := Level(c, nil)
			if r.Level != tt.level || r.Verified != 0 {
				t.Errorf("Level %d verified %d, want %d and 0; reasons:\n%s", r.Level, r.Verified, tt.level, strings.Join(r.Reasons(), "\n"))
			}
			if diff := cmp.Diff(tt.missed, ids(r.Missed())); diff != "" {
				t.Errorf("missed (-want +got):\n%s", diff)
			}
			for _, reason := range r.Reasons() {
				if !strings.HasPrefix(reason, "L") || !strings.Contains(reason, ": ") {
					t.Errorf("reason %q does not name its requirement", reason)
				}
			}
			if len(r.Checks) != 15 {
				t.Errorf("%d checks, want all 15", len(r.Checks))
			}
		})
	}
}

func ids(cs []Check) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

var errRPCNotFound = errors.New("-32601 method not found")

func call(result string) *Call { return &Call{Result: json.RawMessage(result)} }

// fullProbe is what a conformant host answers.
func fullProbe() *Probe {
	return &Probe{
		Transport: "unix",
		Identity:  call(`{"primal":"demo","version":"1.0.0","domain":"braid"}`),
		Health: map[string]*Call{
			MethodHealthLiveness:  call(`{"status":"alive"}`),
			MethodHealthReadiness: call(`{"status":"ready"}`),
			MethodHealthCheck:     call(`{"status":"healthy"}`),
		},
		MethodsChecked: true,
	}
}

const demoL3 = `{"primal":"demo","version":"1.0.0","methods":["braid.create","health.liveness","health.check","health.readiness","identity.get","capabilities.list"],
"provided_capabilities":[{"type":"braid","methods":["create"]}],"consumed_capabilities":[],"cost_estimates":{},"operation_dependencies":{}}`

// TestLevelProbe: live observations settle the unknown requirements, and
// each failure names what was observed.
func TestLevelProbe(t *testing.T) {
	tests := []struct {
		name     string
		caps     string // "" = capabilities.list did not answer
		probe    func(p *Probe)
		level    int
		verified int
		missed   map[string]string // ID → substring of the reason
		unknown  []string
	}{
		{name: "conformant", caps: demoL3, probe: func(*Probe) {}, level: 3, verified: 3},
		{
			name: "no probe", caps: demoL3, probe: nil, level: 3, verified: 0,
			unknown: []string{"L1.responds", "L1.liveness", "L2.callable", "L2.identity", "L2.health"},
		},
		{
			name: "over tcp", caps: demoL3, probe: func(p *Probe) { p.Transport = "tcp" }, level: 3, verified: 0,
			unknown: []string{"L1.responds"},
		},
		{
			name: "liveness in another shape", caps: demoL3,
			probe:  func(p *Probe) { p.Health[MethodHealthLiveness] = call(`{"status":"healthy"}`) },
			level:  0,
			missed: map[string]string{"L1.liveness": `health.liveness answered {"status":"healthy"}`},
		},
		{
			name: "liveness not implemented", caps: demoL3,
			probe: func(p *Probe) { p.Health[MethodHealthLiveness] = &Call{Err: errRPCNotFound} },
			level: 0,
			missed: map[string]string{
				"L1.liveness": "health.liveness failed: -32601 method not found",
				"L2.health":   "failed: health.liveness (-32601 method not found)",
			},
		},
		{
			name: "advertised methods not callable", caps: demoL3,
			probe:    func(p *Probe) { p.MethodNotFound = []string{"braid.create"} },
			level:    1,
			verified: 1,
			missed:   map[string]string{"L2.callable": "1 answered method not found: [braid.create]"},
		},
		{
			name: "identity.get missing", caps: demoL3,
			probe:    func(p *Probe) { p.Identity = &Call{Err: errRPCNotFound} },
			level:    1,
			verified: 1,
			missed:   map[string]string{"L2.identity": "identity.get failed: -32601"},
		},
		{
			name: "identity.get disagrees", caps: demoL3,
			probe:    func(p *Probe) { p.Identity = call(`{"primal":"other","version":"1.0.0"}`) },
			level:    1,
			verified: 1,
			missed:   map[string]string{"L2.identity": `identity.get primal "other" differs from capabilities.list primal "demo"`},
		},
		{
			name: "identity.get without version", caps: demoL3,
			probe:    func(p *Probe) { p.Identity = call(`{"primal":"demo"}`) },
			level:    1,
			verified: 1,
			missed:   map[string]string{"L2.identity": "lacks primal or version"},
		},
		{
			name: "readiness missing", caps: demoL3,
			probe:    func(p *Probe) { delete(p.Health, MethodHealthReadiness) },
			level:    3,
			verified: 1,
			unknown:  []string{"L2.health"},
		},
		{
			name: "capabilities.list does not answer", caps: "",
			probe: func(p *Probe) { p.CapabilitiesErr = errRPCNotFound },
			level: 0,
			missed: map[string]string{
				"L1.responds":  "no answer: -32601 method not found",
				"L1.parseable": "no method list",
				"L1.method":    "no method advertised",
				"L2.primal":    "capabilities.list did not answer",
				"L2.version":   "capabilities.list did not answer",
				"L2.methods":   "capabilities.list did not answer",
				"L2.naming":    "no methods to check",
			},
		},
		{
			name: "every method not found", caps: `{"primal":"demo","version":"1.0.0","methods":["a.b"]}`,
			probe: func(p *Probe) { p.MethodNotFound = []string{"a.b"} },
			level: 0,
			missed: map[string]string{
				"L1.method":   "every advertised method answered method not found",
				"L2.callable": "1 answered method not found: [a.b]",
			},
		},
		{
			name: "bad primal and version", caps: `{"primal":"Rhizo Crypt","version":"latest","methods":["a.b"],"provided_capabilities":[{"type":"a","methods":["b"]}],"consumed_capabilities":[],"cost_estimates":{},"operation_dependencies":{}}`,
			probe: func(p *Probe) { p.Identity = call(`{"primal":"Rhizo Crypt","version":"latest"}`) },
			level: 1, verified: 1,
			missed: map[string]string{
				"L2.primal":  `"Rhizo Crypt" is not lowercase without spaces`,
				"L2.version": `"latest" is not a SemVer version`,
			},
		},
		{
			name: "methods as objects fail the flat array", caps: `{"primal":"demo","version":"1.0.0-dev+b7","methods":[{"name":"a.b"}]}`,
			probe: func(p *Probe) { p.Identity = call(`{"primal":"demo","version":"1.0.0-dev+b7"}`) },
			level: 1, verified: 1,
			missed: map[string]string{"L2.methods": "1 entries are objects"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c *Capabilities
			if tt.caps != "" {
				var err error
				if c, err = Parse(json.RawMessage(tt.caps)); err != nil {
					t.Fatal(err)
				}
			}
			var p *Probe
			if tt.probe != nil {
				p = fullProbe()
				tt.probe(p)
			}
			r := Level(c, p)
			if r.Level != tt.level || r.Verified != tt.verified {
				t.Errorf("Level %d verified %d, want %d and %d\nmissed: %v\nunknown: %v", r.Level, r.Verified, tt.level, tt.verified, r.Reasons(), r.Unobserved())
			}
			got := map[string]string{}
			for _, m := range r.Missed() {
				got[m.ID] = m.Reason
			}
			for id, sub := range tt.missed {
				if !strings.Contains(got[id], sub) {
					t.Errorf("%s reason %q, want it to contain %q", id, got[id], sub)
				}
				delete(got, id)
			}
			// Checks not listed must not fail, except the L3 ones of
			// inputs that have no L3 fields at all.
			for id, reason := range got {
				if !strings.HasPrefix(id, "L3.") {
					t.Errorf("unexpected failure %s: %s", id, reason)
				}
			}
			if tt.unknown != nil {
				if diff := cmp.Diff(tt.unknown, ids(r.Unobserved())); diff != "" {
					t.Errorf("unknown (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestReportJSON(t *testing.T) {
	c, _ := Parse(json.RawMessage(`{"primal":"demo","version":"1.0.0","methods":["Bad"]}`))
	b, err := json.Marshal(Level(c, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"level":1`, `"verified":0`, `"id":"L2.naming","requirement":"method names follow the domain.operation convention","status":"fail","reason":"1 names do not: [\"Bad\" (no dot`, `"status":"unknown"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report JSON lacks %s:\n%s", want, b)
		}
	}
}
