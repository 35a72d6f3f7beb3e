package compose_test

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/capmesh/capmesh/compose"

	"github.com/capmesh/capmesh/internal/specdata"
)

var update = flag.Bool("update", false, "rewrite golden files")

func read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fromJSON(t testing.TB, name string) *compose.Composition {
	t.Helper()
	hosts, err := compose.ParseCapabilities(read(t, name))
	if err != nil {
		t.Fatal(err)
	}
	c := &compose.Composition{Name: strings.TrimSuffix(name, filepath.Ext(name))}
	for _, h := range hosts {
		c.Add(h)
	}
	return c
}

func fromGraph(t testing.TB, name string) *compose.Composition {
	t.Helper()
	c, err := compose.ParseGraph(read(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSeedComposition is the Wire Standard's own example: sweetGrass
// consumes crypto.sign, storage.artifact.store and dag.session.create;
// BearDog, NestGate and rhizoCrypt provide them.
func TestSeedComposition(t *testing.T) {
	c := fromJSON(t, "provenance-hosts.json")
	a := compose.Analyze(c)
	if !a.Complete || !a.OK() {
		t.Fatalf("not complete: %+v", a.Missing)
	}
	for _, consumed := range []string{"crypto.sign", "storage.artifact.store", "dag.session.create"} {
		for _, s := range a.Surface {
			if s == consumed {
				t.Errorf("surface contains consumed %s", s)
			}
		}
	}
	if diff := cmp.Diff([]compose.Ambiguity{{Capability: "anchoring.anchor", Providers: []string{"loamspine", "sweetgrass"}, Chosen: "loamspine"}}, a.Ambiguous); diff != "" {
		t.Errorf("ambiguity (-want +got):\n%s", diff)
	}
	// beardog, nestgate start first; rhizocrypt needs beardog; sweetgrass
	// needs all three.
	want := [][]string{{"beardog", "loamspine", "nestgate"}, {"rhizocrypt"}, {"sweetgrass"}}
	if diff := cmp.Diff(want, a.Waves); diff != "" {
		t.Errorf("waves (-want +got):\n%s", diff)
	}
}

// TestMissingProvider: the incomplete runtime graph lacks a crypto.sign
// provider and a songbird host; both are named with who needs them.
func TestMissingProvider(t *testing.T) {
	c := fromGraph(t, "incomplete-runtime.toml")
	a := compose.Analyze(c)
	if a.Complete || a.OK() {
		t.Fatal("incomplete graph reported complete")
	}
	var got []string
	for _, m := range a.Missing {
		got = append(got, m.Capability+" <- "+strings.Join(m.NeededBy, ","))
	}
	if diff := cmp.Diff([]string{"crypto.sign <- sign", "host songbird <- verify_songbird"}, got); diff != "" {
		t.Errorf("missing (-want +got):\n%s", diff)
	}
	want := [][]string{{"start_nestgate", "verify_songbird"}, {"ingest", "start_rhizocrypt"}, {"dehydrate"}, {"sign"}}
	if diff := cmp.Diff(want, a.Waves); diff != "" {
		t.Errorf("waves (-want +got):\n%s", diff)
	}
	// Adding the host makes it complete.
	c.Add(&compose.Host{Name: "beardog", Live: true, Trusted: true, Methods: []string{"crypto.sign"}})
	c.Add(&compose.Host{Name: "songbird", Live: true, Trusted: true, Methods: []string{"discovery.announce"}})
	if a := compose.Analyze(c); !a.Complete {
		t.Errorf("still missing %+v", a.Missing)
	}
}

// TestCycle: two nodes that depend on each other are a start-up cycle
// and make the composition undeployable.
func TestCycle(t *testing.T) {
	a := compose.Analyze(fromGraph(t, "cyclic-structural.toml"))
	if diff := cmp.Diff([]compose.Cycle{{Kind: "start-up", Nodes: []string{"beardog", "songbird"}}}, a.Cycles); diff != "" {
		t.Errorf("cycles (-want +got):\n%s", diff)
	}
	if !a.Complete || a.OK() {
		t.Errorf("complete=%v ok=%v, want complete but not deployable", a.Complete, a.OK())
	}
}

// TestConsumptionCycle: hosts that consume each other are reported but
// stay deployable (each starts standalone).
func TestConsumptionCycle(t *testing.T) {
	c := &compose.Composition{}
	c.Add(&compose.Host{Name: "a", Live: true, Trusted: true, Methods: []string{"a.x"}, Consumes: []compose.Need{{Capability: "b.y", Required: true}}})
	c.Add(&compose.Host{Name: "b", Live: true, Trusted: true, Methods: []string{"b.y"}, Consumes: []compose.Need{{Capability: "a.x", Required: true}}})
	a := compose.Analyze(c)
	if diff := cmp.Diff([]compose.Cycle{{Kind: "consumption", Nodes: []string{"a", "b"}}}, a.Cycles); diff != "" {
		t.Errorf("cycles (-want +got):\n%s", diff)
	}
	if !a.OK() || len(a.Waves) != 1 {
		t.Errorf("ok=%v waves=%v", a.OK(), a.Waves)
	}
}

// TestOperationCycle: operation_dependencies that loop are reported and
// make planning fail.
func TestOperationCycle(t *testing.T) {
	c := &compose.Composition{}
	c.Add(&compose.Host{Name: "a", Live: true, Trusted: true, Methods: []string{"x.a", "x.b"},
		Deps: map[string][]string{"x.a": {"x.b"}, "x.b": {"x.a"}}})
	a := compose.Analyze(c)
	if len(a.Cycles) != 1 || a.Cycles[0].Kind != "operation" || a.OK() {
		t.Errorf("cycles %+v ok %v", a.Cycles, a.OK())
	}
	if _, err := c.Plan("x.a"); err == nil || !strings.Contains(err.Error(), "loop") {
		t.Errorf("Plan = %v, want a loop error", err)
	}
}

// TestCheapestPlan: proof.generate needs anchoring.anchor, which needs
// braid.create. anchoring.anchor is offered by sweetgrass (high, 40 ms)
// and loamspine (medium, 10 ms): the plan takes loamspine.
func TestCheapestPlan(t *testing.T) {
	c := fromJSON(t, "provenance-hosts.json")
	p, err := c.Plan("proof.generate")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range p.Steps {
		got = append(got, s.Method+"@"+s.Provider)
	}
	if diff := cmp.Diff([]string{"braid.create@sweetgrass", "anchoring.anchor@loamspine", "proof.generate@loamspine"}, got); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if want := (compose.Cost{CPU: "medium", LatencyMS: 20, Known: true}); p.Total != want {
		t.Errorf("total %+v, want %+v", p.Total, want)
	}
	if diff := cmp.Diff([]string{"sweetgrass"}, p.Steps[1].Alternatives); diff != "" {
		t.Errorf("alternatives: %s", diff)
	}
	// The sweetgrass-only chain when loamspine goes away.
	c.Host("loamspine").Live = false
	if _, err := c.Plan("proof.generate"); err == nil {
		t.Error("planned on a host that is not live")
	}
	p, err = c.Plan("anchoring.anchor")
	if err != nil {
		t.Fatal(err)
	}
	if p.Total.CPU != "high" || p.Total.LatencyMS != 42 {
		t.Errorf("fallback total %+v", p.Total)
	}
}

func TestUntrustedProvider(t *testing.T) {
	c := &compose.Composition{}
	c.Add(&compose.Host{Name: "needy", Live: true, Trusted: true, Consumes: []compose.Need{{Capability: "crypto.sign", Required: true}}})
	c.Add(&compose.Host{Name: "rogue", Live: true, Trusted: false, Methods: []string{"crypto.sign"}})
	a := compose.Analyze(c)
	if a.Complete || len(a.Missing) != 1 || !strings.Contains(a.Missing[0].Reason, "rogue provides it but is not trusted") {
		t.Errorf("missing %+v", a.Missing)
	}
}

func TestGraphShapes(t *testing.T) {
	c := fromGraph(t, "pipeline-deploymentgraph.toml")
	if c.Name != "hash-pipeline" || len(c.Nodes) != 3 || len(c.Hosts) != 0 {
		t.Fatalf("parsed %+v", c)
	}
	a := compose.Analyze(c)
	var got []string
	for _, m := range a.Missing {
		got = append(got, m.Capability)
		if m.Capability == "discovery.announce" && m.Required {
			t.Error("a fallback=skip step's need is required")
		}
	}
	if diff := cmp.Diff([]string{"crypto.blake3_hash", "storage.store", "storage.exists", "discovery.announce"}, got); diff != "" {
		t.Errorf("missing (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "[graph]\nid='x'\n", "[[nodes]]\nname_missing = 1\n", "nodes = 3", "[[nodes]]\nid = 'a'\ndepends_on = ['ghost']\n"} {
		c, err := compose.ParseGraph([]byte(bad))
		if err == nil && len(compose.Analyze(c).Problems) == 0 {
			t.Errorf("%q: accepted without a problem", bad)
		}
	}
}

// TestRealResponses composes the recorded real primals: loamSpine's
// hyphenated tokens are reported as tokens no host provides.
func TestRealResponses(t *testing.T) {
	files, _ := filepath.Glob(specdata.Path("ecoprimals/real-responses/*.capabilities.list.json"))
	if len(files) == 0 {
		t.Fatal("no recorded responses in internal/specdata")
	}
	c := &compose.Composition{}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		hosts, err := compose.ParseCapabilities(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, h := range hosts {
			c.Add(h)
		}
	}
	a := compose.Analyze(c)
	if a.Complete {
		t.Error("the recorded primals alone are complete?")
	}
	found := false
	for _, m := range a.Missing {
		if m.Capability == "cryptographic-signing" {
			found = strings.Contains(m.Reason, "token") && strings.Contains(strings.Join(m.NeededBy, ","), "loamspine")
		}
	}
	if !found {
		t.Errorf("cryptographic-signing not reported as loamspine's unmet token: %+v", a.Missing)
	}
}

// TestRender pins the text, DOT and Mermaid renderings of the incomplete
// graph (golden files; -update rewrites them).
func TestRender(t *testing.T) {
	c := fromGraph(t, "incomplete-runtime.toml")
	a := compose.Analyze(c)
	for _, r := range []struct {
		file  string
		write func(*bytes.Buffer) error
	}{
		{"incomplete.txt", func(b *bytes.Buffer) error { return compose.WriteText(b, c, a) }},
		{"incomplete.dot", func(b *bytes.Buffer) error { return compose.WriteDOT(b, c, a) }},
		{"incomplete.mmd", func(b *bytes.Buffer) error { return compose.WriteMermaid(b, c, a) }},
	} {
		var b bytes.Buffer
		if err := r.write(&b); err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join("testdata", "golden", r.file)
		if *update {
			os.MkdirAll(filepath.Dir(golden), 0o755)
			if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), b.String()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", r.file, diff)
		}
	}
	p, err := fromJSON(t, "provenance-hosts.json").Plan("proof.generate")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	compose.WritePlan(&b, p)
	want := "plan for proof.generate\n" +
		"  1. braid.create on sweetgrass (low, 2 ms)\n" +
		"  2. anchoring.anchor on loamspine (medium, 10 ms) after braid.create; cheaper than sweetgrass\n" +
		"  3. proof.generate on loamspine (medium, 8 ms) after anchoring.anchor\n" +
		"  total: medium, 20 ms\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

func FuzzParseGraph(f *testing.F) {
	for _, n := range []string{"incomplete-runtime.toml", "cyclic-structural.toml", "pipeline-deploymentgraph.toml"} {
		f.Add(read(f, n))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := compose.ParseGraph(data)
		if err != nil {
			return
		}
		a := compose.Analyze(c)
		_ = compose.WriteText(&bytes.Buffer{}, c, a)
		_ = compose.WriteDOT(&bytes.Buffer{}, c, a)
		_ = compose.WriteMermaid(&bytes.Buffer{}, c, a)
	})
}

func FuzzParseCapabilities(f *testing.F) {
	f.Add(read(f, "provenance-hosts.json"))
	f.Add([]byte(`["a.b","c"]`))
	f.Add([]byte(`{"result":{"provided_capabilities":[{"type":"x","methods":["y"]}],"operation_dependencies":{"x.y":["x.y"]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		hosts, err := compose.ParseCapabilities(data)
		if err != nil {
			return
		}
		c := &compose.Composition{}
		for _, h := range hosts {
			c.Add(h)
		}
		a := compose.Analyze(c)
		for _, m := range a.Surface {
			_, _ = c.Plan(m)
		}
	})
}

// TestParseCapabilitiesRefusesOtherJSON: JSON that is not a
// capabilities.list answer is refused, not composed as an empty host; a
// bare primal or a consumer without methods is still read.
func TestParseCapabilitiesRefusesOtherJSON(t *testing.T) {
	for _, in := range []string{`{"a":1}`, `{}`, `[{"primal":"x","methods":["x.y"]},{"a":1}]`, `{"result":{"a":1}}`} {
		if _, err := compose.ParseCapabilities([]byte(in)); !errors.Is(err, compose.ErrNotCapabilities) {
			t.Errorf("%s: err = %v, want ErrNotCapabilities", in, err)
		}
	}
	for _, in := range []string{`{"primal":"x"}`, `{"consumed_capabilities":["crypto.sign"]}`, `["a.b"]`} {
		if _, err := compose.ParseCapabilities([]byte(in)); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
}

// TestPlanTotalIsRounded pins a display bug: summed decimal latencies
// printed as 0.15000000000000002 ms.
func TestPlanTotalIsRounded(t *testing.T) {
	hosts, err := compose.ParseCapabilities([]byte(`{"primal":"kv","version":"1.0.0","methods":["kv.put","kv.digest"],
		"cost_estimates":{"kv.put":{"cpu":"low","latency_ms":0.05},"kv.digest":{"cpu":"low","latency_ms":0.1}},
		"operation_dependencies":{"kv.digest":["kv.put"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	c := &compose.Composition{}
	for _, h := range hosts {
		c.Add(h)
	}
	p, err := c.Plan("kv.digest")
	if err != nil {
		t.Fatal(err)
	}
	if p.Total.LatencyMS != 0.15 || p.Total.String() != "low, 0.15 ms" {
		t.Fatalf("total %v (%s)", p.Total.LatencyMS, p.Total)
	}
}
