package conformance_test

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/conformance"
)

// TestJUnit: the XML is well-formed and counts failures and skips.
func TestJUnit(t *testing.T) {
	m := &conformance.MachineReport{Hosts: []*conformance.HostReport{
		{Endpoint: "unix:///a.sock", Reachable: true, Primal: "a", Checks: []conformance.Check{
			{Suite: "wire", ID: "L1.responds", Requirement: "r", Status: conformance.Pass},
			{Suite: "wire", ID: "L2.identity", Requirement: "r", Status: conformance.Fail, Reason: "identity.get failed <&>", Source: "s"},
			{Suite: "ipc", ID: "IPC.batch", Requirement: "r", Status: conformance.Warn, Reason: "w"},
			{Suite: "chp", ID: "CHP.9", Requirement: "r", Status: conformance.Skip, Reason: "n/a"},
		}},
		{Endpoint: "unix:///dead.sock", Error: "connection refused"},
	}}
	var buf bytes.Buffer
	if err := conformance.WriteJUnit(&buf, m); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Skipped  int `xml:"skipped,attr"`
		Suites   []struct {
			Name string `xml:"name,attr"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, buf.String())
	}
	if doc.Tests != 5 || doc.Failures != 2 || doc.Skipped != 1 || len(doc.Suites) != 2 {
		t.Errorf("counts %+v\n%s", doc, buf.String())
	}
}

func TestMeets(t *testing.T) {
	h := &conformance.HostReport{Reachable: true, Level: 3, Verified: 2, CHP: &conformance.CHPSummary{Passed: 8}}
	for _, tt := range []struct {
		r    conformance.Requirement
		want bool
	}{
		{conformance.Requirement{Level: 3}, true},
		{conformance.Requirement{Level: 3, Strict: true}, false},
		{conformance.Requirement{Level: 2, Strict: true, CHP: true}, true},
	} {
		if ok, why := h.Meets(tt.r); ok != tt.want {
			t.Errorf("Meets(%+v) = %v (%s)", tt.r, ok, why)
		}
	}
	h.CHP.Failed = 1
	if ok, _ := h.Meets(conformance.Requirement{CHP: true}); ok {
		t.Error("a failed CHP requirement meets --require-chp")
	}
	if ok, _ := (&conformance.HostReport{}).Meets(conformance.Requirement{}); ok {
		t.Error("an unreachable host meets no requirement")
	}
}

// TestGate: --require-chp on a machine where a node (CHP binding, nothing
// to govern) runs beside a governing host passes; the node alone does not;
// a gate over no hosts fails; no requirement always passes.
func TestGate(t *testing.T) {
	node := &conformance.HostReport{Endpoint: "unix:///r/capmesh.sock", Reachable: true, Level: 3, Verified: 3, CHP: &conformance.CHPSummary{NoCapabilities: true}}
	kv := &conformance.HostReport{Endpoint: "unix:///r/kvhost.sock", Reachable: true, Level: 3, Verified: 3, CHP: &conformance.CHPSummary{Passed: 7}}
	bad := &conformance.HostReport{Endpoint: "unix:///r/bad.sock", Reachable: true, Level: 3, Verified: 3, CHP: &conformance.CHPSummary{Passed: 6, Failed: 1}}
	chp := conformance.Requirement{CHP: true}
	for _, tt := range []struct {
		name  string
		m     *conformance.MachineReport
		r     conformance.Requirement
		fails []string
	}{
		{"node and host", &conformance.MachineReport{Dir: "/r", Hosts: []*conformance.HostReport{node, kv}}, chp, nil},
		{"node alone", &conformance.MachineReport{Dir: "/r", Hosts: []*conformance.HostReport{node}}, chp, []string{"/r"}},
		{"failing host", &conformance.MachineReport{Dir: "/r", Hosts: []*conformance.HostReport{node, kv, bad}}, chp, []string{"unix:///r/bad.sock"}},
		{"empty dir", &conformance.MachineReport{Dir: "/r"}, conformance.Requirement{Level: 3}, []string{"/r"}},
		{"empty, no gate", &conformance.MachineReport{Dir: "/r"}, conformance.Requirement{}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.m.Gate(tt.r)
			var eps []string
			for _, g := range got {
				eps = append(eps, g.Endpoint)
			}
			if strings.Join(eps, ",") != strings.Join(tt.fails, ",") {
				t.Errorf("Gate = %+v, want failures at %v", got, tt.fails)
			}
		})
	}
}
