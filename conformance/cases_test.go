package conformance_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/conformance"
)

func TestCasesParse(t *testing.T) {
	cases, err := conformance.Cases()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, c := range cases {
		if ids[c.ID] {
			t.Errorf("duplicate case id %s", c.ID)
		}
		ids[c.ID] = true
		if c.Source == "" || len(c.Send) == 0 || len(c.Expect) == 0 {
			t.Errorf("%s: incomplete case %+v", c.Name, c)
		}
	}
	for _, want := range []string{"IPC.newline", "IPC.parse_error", "IPC.invalid_request", "IPC.method_not_found", "IPC.id_echo", "IPC.notification"} {
		if !ids[want] {
			t.Errorf("no case decides %s", want)
		}
	}
}

func TestParseCaseErrors(t *testing.T) {
	for name, src := range map[string]string{
		"no id":          "requirement: r\n-- send --\nx\n-- expect --\n{}\n",
		"bad header":     "id x\n-- send --\nx\n-- expect --\n{}\n",
		"bad severity":   "id: a\nrequirement: r\nseverity: maybe\n-- send --\nx\n-- expect --\n{}\n",
		"no expect":      "id: a\nrequirement: r\n-- send --\nx\n",
		"bad expect":     "id: a\nrequirement: r\n-- send --\nx\n-- expect --\n{nope\n",
		"unknown header": "id: a\nrequirement: r\ncolour: red\n-- send --\nx\n-- expect --\n{}\n",
		"extra section":  "id: a\nrequirement: r\n-- send --\nx\n-- expect --\n{}\n-- other --\n",
	} {
		if _, err := conformance.ParseCase(name, []byte(src)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func dec(t testing.TB, s string) any {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, value string
		want           bool
	}{
		{`{"id":1}`, `{"jsonrpc":"2.0","id":1,"result":{}}`, true},
		{`{"id":1}`, `{"id":1.0}`, true},
		{`{"id":1}`, `{"id":"1"}`, false},
		{`{"id":null}`, `{"id":null,"error":{"code":-32700}}`, true},
		{`{"id":null}`, `{"error":{"code":-32700}}`, false},
		{`{"error":{"code":-32700}}`, `{"error":{"code":-32700,"message":"Parse error"}}`, true},
		{`{"error":{"code":-32700}}`, `{"error":{"code":-32600}}`, false},
		{`[{"id":"a"},{"id":"b"}]`, `[{"id":"b"},{"id":"a"}]`, true},
		{`[{"id":"a"},{"id":"b"}]`, `[{"id":"a"}]`, false},
		{`[{"id":"a"},{"id":"a"}]`, `[{"id":"a"},{"id":"b"}]`, false},
		{`{"id":"é"}`, `{"id":"\u00e9"}`, true},
		{`{}`, `[]`, false},
		{`true`, `true`, true},
	}
	for _, tt := range tests {
		if got := conformance.Match(dec(t, tt.pattern), dec(t, tt.value)); got != tt.want {
			t.Errorf("Match(%s, %s) = %v, want %v", tt.pattern, tt.value, got, tt.want)
		}
	}
}

func FuzzParseCase(f *testing.F) {
	files, _ := filepath.Glob("testdata/cases/*.txtar")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := conformance.ParseCase("fuzz", data)
		if err != nil {
			return
		}
		if c.ID == "" || len(c.Send) == 0 || len(c.Expect) == 0 {
			t.Fatalf("accepted an incomplete case: %+v", c)
		}
	})
}

func FuzzMatch(f *testing.F) {
	f.Add([]byte(`{"id":1}`), []byte(`{"jsonrpc":"2.0","id":1}`))
	f.Add([]byte(`[{"id":"a"},1]`), []byte(`[1,{"id":"a"}]`))
	f.Fuzz(func(t *testing.T, p, v []byte) {
		var pv, vv any
		dp := json.NewDecoder(bytes.NewReader(p))
		dp.UseNumber()
		dv := json.NewDecoder(bytes.NewReader(v))
		dv.UseNumber()
		if dp.Decode(&pv) != nil || dv.Decode(&vv) != nil {
			return
		}
		// Every value matches itself.
		if !conformance.Match(vv, vv) {
			t.Fatalf("%s does not match itself", v)
		}
		_ = conformance.Match(pv, vv)
	})
}

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
