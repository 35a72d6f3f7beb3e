package wire

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/capmesh/capmesh/identity"
)

var update = flag.Bool("update", false, "rewrite golden files")

// golden compares got with testdata/golden/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

func indent(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// TestCapabilitiesListWire pins the bytes a host emits: every Level 3 field
// present even when empty, field order as in the standard.
func TestCapabilitiesListWire(t *testing.T) {
	golden(t, "capabilities_list_minimal.json", indent(t, CapabilitiesList{
		Primal: "demo", Version: "0.1.0", Protocol: Protocol,
	}))
	methods := []string{"braid.create", "attribution.chain", "capabilities.list", "health.liveness", "identity.get"}
	key := SignAnnouncement(identity.DeriveEcoPrimalsCompat("demo", "node-1"), "demo", "0.1.0", methods)
	full := CapabilitiesList{
		Primal: "demo", Version: "0.1.0", Methods: methods,
		ProvidedCapabilities: GroupByDomain(methods),
		ConsumedCapabilities: []string{"crypto.sign"},
		CostEstimates: map[string]CostEstimate{
			"braid.create":      {CPU: CostLow, LatencyMS: 2},
			"attribution.chain": {CPU: CostHigh, LatencyMS: 50, MemoryBytes: ptr(int64(1 << 20)), GPUEligible: ptr(false)},
		},
		OperationDependencies: map[string][]string{"attribution.chain": {"braid.create"}, "braid.create": nil},
		Protocol:              Protocol,
		Transport:             []string{TransportUDS, TransportTCP},
		SignedAnnouncement:    &key,
		TransportSecurity:     &TransportSecurity{BTSPRequired: false, CleartextAvailable: true},
	}
	b := indent(t, full)
	golden(t, "capabilities_list_full.json", b)

	// What we emit is read back at Level 3 without a single deviation, and
	// its announcement verifies.
	c, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Deviations) != 0 {
		t.Errorf("deviations in our own output:\n%s", deviations(c))
	}
	if r := Level(c, nil); r.Level != 3 {
		t.Errorf("Level %d, want 3: %v", r.Level, r.Reasons())
	}
	if _, err := VerifyAnnouncement(*c.SignedAnnouncement, c.Primal, c.Version, c.Methods); err != nil {
		t.Errorf("our announcement does not verify: %v", err)
	}
}

func TestGroupByDomain(t *testing.T) {
	got := GroupByDomain([]string{"dag.session.create", "health.liveness", "dag.event.append", "nodot", ".x", "y.", "crypto.x25519.generate"})
	want := []ProvidedCapability{
		{Type: "crypto", Methods: []string{"x25519.generate"}},
		{Type: "dag", Methods: []string{"session.create", "event.append"}},
		{Type: "health", Methods: []string{"liveness"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GroupByDomain (-want +got):\n%s", diff)
	}
	// Grouping round-trips through Parse to the qualified names.
	methods := []string{"dag.session.create", "dag.event.append", "health.liveness"}
	b, _ := json.Marshal(CapabilitiesList{Primal: "p", Version: "1.0.0", Methods: methods, ProvidedCapabilities: GroupByDomain(methods)})
	c, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Group{{Type: "dag", Methods: methods[:2]}, {Type: "health", Methods: methods[2:]}}, c.Groups); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestParseIdentity(t *testing.T) {
	id, err := ParseIdentity(resultOf(t, ecoFile(t, "real-responses/loamspine.identity.get.json")))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Identity{Primal: "loamspine", Version: "0.9.16", Domain: "permanence", License: "AGPL-3.0-or-later"}, id); diff != "" {
		t.Errorf("ParseIdentity (-want +got):\n%s", diff)
	}
	for _, bad := range []string{`[]`, `"x"`, `null`, `{"primal":1}`, `{"version":{}}`, `{`} {
		if _, err := ParseIdentity(json.RawMessage(bad)); err == nil {
			t.Errorf("ParseIdentity(%s) succeeded", bad)
		}
	}
	b, _ := json.Marshal(Identity{Primal: "demo", Version: "1.0.0"})
	if string(b) != `{"primal":"demo","version":"1.0.0"}` {
		t.Errorf("Identity marshals to %s", b)
	}
}

func FuzzParseIdentity(f *testing.F) {
	f.Add([]byte(`{"primal":"loamspine","version":"0.9.16","domain":"permanence","license":"AGPL-3.0-or-later","edition":"2024"}`))
	f.Add([]byte(`{"primal":1}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		id, err := ParseIdentity(in)
		if err != nil {
			return
		}
		// Whatever parsed re-marshals and parses to the same identity.
		b, err := json.Marshal(id)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseIdentity(b)
		if err != nil || again != id {
			t.Fatalf("round trip: %+v → %s → %+v, %v", id, b, again, err)
		}
	})
}
