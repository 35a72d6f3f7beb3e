package wire

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCapabilityFormats parses every example of spec/ecoprimals/
// capability-formats and compares the names with index.json's
// expected_extraction. A plain list is what biomeOS returns, and every such
// file must give the same under the standard's order; a map gives the
// expectation per reader.
func TestCapabilityFormats(t *testing.T) {
	var index struct {
		Files []struct {
			File     string          `json:"file"`
			Format   string          `json:"format"`
			Expected json.RawMessage `json:"expected_extraction"`
		} `json:"files"`
	}
	if err := json.Unmarshal(ecoFile(t, "capability-formats/index.json"), &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Files) < 16 {
		t.Fatalf("index.json lists %d files, want at least 16", len(index.Files))
	}
	readers := map[string]Order{
		"biomeos_cap_probe":      OrderBiomeOS,
		"wire_standard_priority": OrderStandard,
		"primalspring":           OrderPrimalSpring,
	}
	for _, f := range index.Files {
		t.Run(f.File, func(t *testing.T) {
			result := resultOf(t, ecoFile(t, "capability-formats/"+f.File))
			want := map[Order][]string{}
			var list []string
			if json.Unmarshal(f.Expected, &list) == nil {
				want[OrderBiomeOS] = list
				want[OrderStandard] = list
			} else {
				var byReader map[string][]string
				if err := json.Unmarshal(f.Expected, &byReader); err != nil {
					t.Fatalf("expected_extraction: %v", err)
				}
				for k, v := range byReader {
					o, ok := readers[k]
					if !ok {
						t.Fatalf("unknown reader %q in index.json", k)
					}
					want[o] = v
				}
			}
			// The biomeOS tests sort the Format E output before comparing
			// (groups come in wire order, the expectation is sorted), so
			// its order is not part of the expectation. Format D comes out
			// in key order, as serde_json gives it, and is compared as is.
			unordered := strings.HasPrefix(f.Format, "E")
			for o, w := range want {
				c, err := Parse(result, WithOrder(o))
				if err != nil {
					t.Fatalf("%v: %v", o, err)
				}
				got := c.Names
				if unordered {
					got, w = sorted(got), sorted(w)
				}
				if diff := cmp.Diff(w, got, cmp.Comparer(func(a, b []string) bool {
					return len(a) == 0 && len(b) == 0 || slices.Equal(a, b)
				})); diff != "" {
					t.Errorf("%v order: names (-want +got):\n%s", o, diff)
				}
			}
		})
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// realMethods returns the methods array of a recorded response.
func realMethods(t *testing.T, result json.RawMessage) []string {
	t.Helper()
	var r struct {
		Methods      []string `json:"methods"`
		Capabilities []string `json:"capabilities"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		t.Fatal(err)
	}
	if r.Methods != nil {
		return r.Methods
	}
	return r.Capabilities
}

// TestRealResponses parses every capabilities.list response rebuilt from
// real primals and checks the quirks the README records.
func TestRealResponses(t *testing.T) {
	tests := []struct {
		file       string
		order      Order
		source     Source
		nMethods   int
		groups     int
		group      string // a group type to inspect (the first group of that type)
		groupWant  []string
		deviations []string // substrings of deviations that must be reported
		extra      []string
		protocol   string
		transport  []string
		consumed   []Consumed
	}{
		{
			file: "rhizocrypt.capabilities.list.json", source: SourceMethods, nMethods: 42, groups: 8,
			group:      "rootpulse",
			groupWant:  []string{"rootpulse.record_build", "rootpulse.dehydrate_state"},
			deviations: []string{"provided_capabilities: 42 methods in 8 groups are fully qualified", `protocol: is "jsonrpc_2.0"`},
			extra:      []string{"count", "descriptors"},
			protocol:   "jsonrpc_2.0",
			transport:  []string{"http+tarpc", "uds", "tcp"},
		},
		{
			file: "loamspine.capabilities.list.json", source: SourceMethods, nMethods: 53, groups: 14,
			group:     "bonding",
			groupWant: []string{"bonding.ledger.store", "bonding.ledger.retrieve", "bonding.ledger.list"},
			deviations: []string{
				"capabilities: disagrees with methods: 3 names only in capabilities [permanence, ledger, inclusion-proofs]",
				"consumed_capabilities: 8 entries are not method names",
			},
			extra: []string{"count"},
		},
		{
			file: "loamspine.capabilities.list.json", order: OrderBiomeOS, source: SourceCapabilities, nMethods: 37, groups: 14,
			extra:     []string{"count"},
			group:     "health",
			groupWant: []string{"health.check", "health.liveness", "health.readiness"},
		},
		{
			file: "sweetgrass.capabilities.list.json", source: SourceMethods, nMethods: 50, groups: 18,
			group:     "capability",
			groupWant: []string{"capability.list", "capability.call"},
			extra:     []string{"btsp", "count", "description", "domains", "operations"},
			protocol:  "jsonrpc-2.0",
			transport: []string{"http", "uds"},
		},
		{
			file: "nestgate.capabilities.list.json", source: SourceProvidedCapabilities, nMethods: 74, groups: 13,
			group:     "zfs",
			groupWant: []string{"zfs.pool.list", "zfs.pool.get", "zfs.pool.health", "zfs.dataset.list", "zfs.dataset.get", "zfs.snapshot.list", "zfs.health"},
			deviations: []string{
				"provided_capabilities[11].methods: 13 methods are not among the advertised methods",
				"consumed_capabilities: 3 entries are objects",
			},
			extra:     []string{"count"},
			transport: []string{"uds", "tcp", "http"},
			consumed: []Consumed{
				{Name: "security", Reason: "BTSP handshake crypto delegation (security capability provider)", Required: ptr(false)},
				{Name: "discovery_mesh", Reason: "Service mesh registration and heartbeat (discovery capability provider)", Required: ptr(false)},
				{Name: "crypto", Reason: "Content-addressed hashing, signature verification (delegated via IPC)", Required: ptr(false)},
			},
		},
		{
			file: "nestgate.capabilities.list.json", order: OrderBiomeOS, source: SourceCapabilities, nMethods: 99, groups: 13,
			extra: []string{"count"},
		},
		{
			file: "nestgate.semantic_router.capabilities.list.json", source: SourceCapabilities, nMethods: 65,
			extra: []string{"count"},
		},
		{
			file: "songbird.capabilities.list.json", source: SourceMethods, nMethods: 79, groups: 14,
			group:     "ipc",
			groupWant: []string{"rpc.methods", "rpc.discover", "ipc.register", "ipc.resolve", "ipc.discover", "capability.resolve", "lifecycle.composition", "lifecycle.validate_consumed"},
			deviations: []string{
				`provided_capabilities[1].type: type "network" appears in more than one group`,
				"provided_capabilities[0].methods: 1 methods are not among the advertised methods: [discovery.list_peers]",
				"provided_capabilities[1].methods: 2 methods are not among the advertised methods: [songbird.federation.peers, songbird.federation.status]",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file+"/"+tt.order.String(), func(t *testing.T) {
			result := resultOf(t, ecoFile(t, "real-responses/"+tt.file))
			c, err := Parse(result, WithOrder(tt.order))
			if err != nil {
				t.Fatal(err)
			}
			if c.Source != tt.source {
				t.Errorf("Source = %q, want %q", c.Source, tt.source)
			}
			if len(c.Methods) != tt.nMethods {
				t.Errorf("%d methods, want %d", len(c.Methods), tt.nMethods)
			}
			if tt.source == SourceMethods || tt.source == SourceCapabilities {
				want := realMethods(t, result)
				if tt.source == SourceCapabilities {
					var r struct{ Capabilities []string }
					_ = json.Unmarshal(result, &r)
					want = r.Capabilities
				}
				if diff := cmp.Diff(want, c.Methods); diff != "" {
					t.Errorf("methods (-want +got):\n%s", diff)
				}
			}
			if len(c.Groups) != tt.groups {
				t.Errorf("%d groups, want %d", len(c.Groups), tt.groups)
			}
			checked := false
			for _, g := range c.Groups {
				for _, m := range g.Methods {
					if g.Type != "" && strings.HasPrefix(m, g.Type+"."+g.Type+".") {
						t.Errorf("group %s: doubled type in %q", g.Type, m)
					}
				}
				if g.Type == tt.group && !checked {
					checked = true
					if diff := cmp.Diff(tt.groupWant, g.Methods); diff != "" {
						t.Errorf("group %s (-want +got):\n%s", g.Type, diff)
					}
				}
			}
			if tt.group != "" && !checked {
				t.Errorf("no group %q", tt.group)
			}
			for _, d := range tt.deviations {
				if !hasDeviation(c, d) {
					t.Errorf("no deviation %q in:\n%s", d, deviations(c))
				}
			}
			var extra []string
			for k := range c.Extra {
				extra = append(extra, k)
			}
			if diff := cmp.Diff(sorted(tt.extra), sorted(extra)); diff != "" {
				t.Errorf("extra members (-want +got):\n%s", diff)
			}
			if tt.protocol != "" && c.Protocol != tt.protocol {
				t.Errorf("protocol %q, want %q", c.Protocol, tt.protocol)
			}
			if tt.transport != nil {
				if diff := cmp.Diff(tt.transport, c.Transport); diff != "" {
					t.Errorf("transport (-want +got):\n%s", diff)
				}
			}
			if tt.consumed != nil {
				if diff := cmp.Diff(tt.consumed, c.Consumed); diff != "" {
					t.Errorf("consumed (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestSongbirdCapabilitiesMethods: capabilities.methods is a token→methods
// map, not a capabilities.list result. The standard order finds no method
// list in it; primalSpring's key fallback reads the tokens, which are the
// descriptions of the groups capabilities.list sends.
func TestSongbirdCapabilitiesMethods(t *testing.T) {
	result := resultOf(t, ecoFile(t, "real-responses/songbird.capabilities.methods.json"))
	c, err := Parse(result)
	if err != nil {
		t.Fatal(err)
	}
	if c.Source != SourceNone || len(c.Names) != 0 {
		t.Errorf("standard order: Source %q names %v, want none", c.Source, c.Names)
	}
	ps, err := Parse(result, WithOrder(OrderPrimalSpring))
	if err != nil {
		t.Fatal(err)
	}
	if ps.Source != SourceObjectKeys || len(ps.Names) != 14 {
		t.Fatalf("primalspring order: Source %q, %d names, want object_keys and 14", ps.Source, len(ps.Names))
	}
	list, err := Parse(resultOf(t, ecoFile(t, "real-responses/songbird.capabilities.list.json")))
	if err != nil {
		t.Fatal(err)
	}
	var tokenMap map[string][]string
	if err := json.Unmarshal(result, &tokenMap); err != nil {
		t.Fatal(err)
	}
	var raw struct {
		ProvidedCapabilities []struct {
			Description string   `json:"description"`
			Methods     []string `json:"methods"`
		} `json:"provided_capabilities"`
	}
	if err := json.Unmarshal(resultOf(t, ecoFile(t, "real-responses/songbird.capabilities.list.json")), &raw); err != nil {
		t.Fatal(err)
	}
	for i, g := range raw.ProvidedCapabilities {
		token := strings.TrimSuffix(g.Description, " capability group")
		if diff := cmp.Diff(tokenMap[token], list.Groups[i].Methods); diff != "" {
			t.Errorf("group %d (%s) vs capabilities.methods (-map +group):\n%s", i, token, diff)
		}
	}
}

func hasDeviation(c *Capabilities, substr string) bool {
	for _, d := range c.Deviations {
		if strings.Contains(d.String(), substr) {
			return true
		}
	}
	return false
}

func deviations(c *Capabilities) string {
	var b strings.Builder
	for _, d := range c.Deviations {
		b.WriteString("  " + d.String() + "\n")
	}
	return b.String()
}

func ptr[T any](v T) *T { return &v }

// TestParseQuirks pins the group-qualification rules and the other
// tolerated departures on small inputs.
func TestParseQuirks(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		methods   []string
		groups    map[string][]string
		deviation string
	}{
		{
			name:    "short group methods (the standard)",
			in:      `{"primal":"x","version":"1.0.0","methods":["dag.session.create"],"provided_capabilities":[{"type":"dag","methods":["session.create"]}]}`,
			methods: []string{"dag.session.create"},
			groups:  map[string][]string{"dag": {"dag.session.create"}},
		},
		{
			name:      "fully qualified group methods are not doubled",
			in:        `{"methods":["dag.session.create","dag.event.append"],"provided_capabilities":[{"type":"dag","methods":["dag.session.create","dag.event.append"]}]}`,
			methods:   []string{"dag.session.create", "dag.event.append"},
			groups:    map[string][]string{"dag": {"dag.session.create", "dag.event.append"}},
			deviation: "fully qualified",
		},
		{
			name:    "fully qualified without a methods list",
			in:      `{"provided_capabilities":[{"type":"dag","methods":["dag.session.create"]}]}`,
			methods: []string{"dag.session.create"},
			groups:  map[string][]string{"dag": {"dag.session.create"}},
		},
		{
			name:    "dotted short names stay short when methods says so",
			in:      `{"methods":["bonding.ledger.store"],"provided_capabilities":[{"type":"bonding","methods":["ledger.store"]}]}`,
			methods: []string{"bonding.ledger.store"},
			groups:  map[string][]string{"bonding": {"bonding.ledger.store"}},
		},
		{
			name:    "a group naming another domain's method (Songbird)",
			in:      `{"methods":["relay.serve","stun.bind"],"provided_capabilities":[{"type":"network","methods":["relay.serve","stun.bind"]}]}`,
			methods: []string{"relay.serve", "stun.bind"},
			groups:  map[string][]string{"network": {"relay.serve", "stun.bind"}},
		},
		{
			name:    "a domain that is also a method segment is qualified",
			in:      `{"methods":["zfs.health","health"],"provided_capabilities":[{"type":"zfs","methods":["health"]}]}`,
			methods: []string{"zfs.health", "health"},
			groups:  map[string][]string{"zfs": {"zfs.health"}},
		},
		{
			name:      "methods as objects",
			in:        `{"methods":[{"name":"a.b"},{"method":"c.d"},"e.f",{"x":1},7]}`,
			methods:   []string{"a.b", "c.d", "e.f"},
			deviation: "2 entries are neither strings nor objects",
		},
		{
			name:      "duplicate methods are dropped once",
			in:        `{"methods":["a.b","a.b","c.d"]}`,
			methods:   []string{"a.b", "c.d"},
			deviation: "duplicate entries [a.b]",
		},
		{
			name:    "duplicate member: the last wins, as in encoding/json and serde_json",
			in:      `{"methods":["a.b"],"methods":["c.d"]}`,
			methods: []string{"c.d"},
		},
		{
			name:      "transport given as a string",
			in:        `{"methods":["a.b"],"transport":"uds"}`,
			methods:   []string{"a.b"},
			deviation: "transport: is a string",
		},
		{
			name:      "malformed signed_announcement is reported, not fatal",
			in:        `{"methods":["a.b"],"signed_announcement":{"schema_version":"two"}}`,
			methods:   []string{"a.b"},
			deviation: "signed_announcement: malformed",
		},
		{
			name:    "semantic_mappings in key order, as serde_json (biomeOS) gives them",
			in:      `{"semantic_mappings":{"z":{"b":{},"a":{}},"y":1}}`,
			methods: []string{"y", "z.a", "z.b"},
		},
		{
			name:      "null members count as absent",
			in:        `{"methods":null,"capabilities":["a.b"],"provided_capabilities":null}`,
			methods:   []string{"a.b"},
			deviation: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse(json.RawMessage(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.methods, c.Methods); diff != "" {
				t.Errorf("methods (-want +got):\n%s", diff)
			}
			for typ, want := range tt.groups {
				found := false
				for _, g := range c.Groups {
					if g.Type == typ {
						found = true
						if diff := cmp.Diff(want, g.Methods); diff != "" {
							t.Errorf("group %s (-want +got):\n%s", typ, diff)
						}
					}
				}
				if !found {
					t.Errorf("no group %s", typ)
				}
			}
			if tt.deviation != "" && !hasDeviation(c, tt.deviation) {
				t.Errorf("no deviation %q in:\n%s", tt.deviation, deviations(c))
			}
		})
	}
}

func TestParseEnvelopeAndMetadata(t *testing.T) {
	in := `{"primal":"sweetgrass","version":"0.7.27","methods":["braid.create","anchoring.anchor"],
	"provided_capabilities":[{"type":"braid","methods":["create"],"version":"0.7.27","description":"Attribution braids"}],
	"consumed_capabilities":["crypto.sign"],
	"cost_estimates":{"braid.create":{"cpu":"low","latency_ms":2},"anchoring.anchor":{"cpu":"high","latency_ms":50.5,"memory_bytes":8192,"gpu_eligible":false}},
	"operation_dependencies":{"anchoring.anchor":["braid.create"],"braid.create":[]},
	"protocol":"jsonrpc-2.0","transport":["uds","tcp"],
	"transport_security":{"btsp_required":false,"btsp_version":"2.0","btsp_server_available":false,"cleartext_available":true}}`
	c, err := Parse(json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	want := &Capabilities{
		Source:   SourceMethods,
		Detected: []Source{SourceMethods, SourceProvidedCapabilities},
		Primal:   "sweetgrass", Version: "0.7.27",
		Names:    []string{"braid.create", "anchoring.anchor"},
		Methods:  []string{"braid.create", "anchoring.anchor"},
		Groups:   []Group{{Type: "braid", Methods: []string{"braid.create"}, Version: "0.7.27", Description: "Attribution braids"}},
		Consumed: []Consumed{{Name: "crypto.sign"}},
		CostEstimates: map[string]CostEstimate{
			"braid.create":     {CPU: "low", LatencyMS: 2},
			"anchoring.anchor": {CPU: "high", LatencyMS: 50.5, MemoryBytes: ptr(int64(8192)), GPUEligible: ptr(false)},
		},
		OperationDependencies: map[string][]string{"anchoring.anchor": {"braid.create"}, "braid.create": {}},
		Protocol:              "jsonrpc-2.0",
		Transport:             []string{"uds", "tcp"},
		TransportSecurity:     &TransportSecurity{BTSPVersion: "2.0", CleartextAvailable: true},
		Envelope: Envelope{
			Object: true, Primal: Present, Version: Present, Methods: Present,
			ProvidedCapabilities: Present, ConsumedCapabilities: Present, CostEstimates: Present, OperationDependencies: Present,
			MethodNames: []string{"braid.create", "anchoring.anchor"},
		},
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{``, `   `, `{`, `[1,`, `"methods"`, `42`, `true`, `null`, `{"a":1}x`} {
		t.Run(in, func(t *testing.T) {
			c, err := Parse(json.RawMessage(in))
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want an error", in, c)
			}
			if !strings.HasPrefix(err.Error(), "parse capabilities: ") {
				t.Errorf("error %q lacks context", err)
			}
		})
	}
	_, err := Parse(json.RawMessage(`"x"`))
	if !errors.Is(err, ErrNotCapabilities) {
		t.Errorf("string result: error %v is not ErrNotCapabilities", err)
	}
	_, err = Parse(json.RawMessage(`{}`), WithOrder(Order(99)))
	if err == nil {
		t.Error("unknown order accepted")
	}
}

func TestParseMalformedMembers(t *testing.T) {
	c, err := Parse(json.RawMessage(`{"primal":7,"version":["1"],"methods":"a.b","provided_capabilities":{},"consumed_capabilities":"x","cost_estimates":[],"operation_dependencies":"y","protocol":2}`))
	if err != nil {
		t.Fatal(err)
	}
	e := c.Envelope
	got := []Field{e.Primal, e.Version, e.Methods, e.ProvidedCapabilities, e.ConsumedCapabilities, e.CostEstimates, e.OperationDependencies}
	want := []Field{Malformed, Malformed, Malformed, Malformed, Malformed, Malformed, Malformed}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
	if len(c.Deviations) != 8 {
		t.Errorf("%d deviations, want 8:\n%s", len(c.Deviations), deviations(c))
	}
	if r := Level(c, nil); r.Level != 0 {
		t.Errorf("Level %d, want 0", r.Level)
	}
}

// FuzzParse: any input either fails with an error or parses into a result
// whose invariants hold, and Level never panics on it.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"primal":"p","version":"1.0.0","methods":["a.b"],"provided_capabilities":[{"type":"a","methods":["b"]}]}`))
	f.Add([]byte(`["crypto.sign",{"method":"crypto.verify"}]`))
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, o := range []Order{OrderStandard, OrderBiomeOS, OrderPrimalSpring} {
			c, err := Parse(in, WithOrder(o))
			if err != nil {
				continue
			}
			if len(dedupe(c.Names)) != len(c.Names) {
				t.Fatalf("duplicate names %v", c.Names)
			}
			names := map[string]bool{}
			for _, n := range c.Names {
				names[n] = true
			}
			for _, m := range c.Methods {
				if !names[m] {
					t.Fatalf("method %q not among names", m)
				}
			}
			if (c.Source == SourceNone) != (len(c.Names) == 0) {
				t.Fatalf("source %q with %d names", c.Source, len(c.Names))
			}
			r := Level(c, nil)
			if r.Level < 0 || r.Level > 3 || r.Verified > r.Level {
				t.Fatalf("level %d verified %d", r.Level, r.Verified)
			}
		}
	})
}
