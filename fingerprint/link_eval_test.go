package fingerprint

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/canonical"
	"github.com/google/go-cmp/cmp"
)

// evalVectorsPath holds full capability links, diffToolRefs results and
// runtime tool binding hashes printed by the reference TypeScript source
// under Node 20.20.2. How they were produced is written in the file itself
// ("about" and "generator"): a throwaway harness outside this repository
// built reference objects from each link-input document (each policy
// object evaluating to its "allow", each dynamic toolkit's create()
// returning its "create" list) and recorded computeFullCapabilityLink's
// link, Object.keys of the evaluated tools and the evaluated instructions.
// Only inputs and outputs are committed, never the reference's code.
const evalVectorsPath = "testdata/links-eval.json"

func loadEvalVectors(t *testing.T) canonical.Value {
	t.Helper()
	raw, err := os.ReadFile(evalVectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := canonical.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func stringsOf(t *testing.T, v canonical.Value) []string {
	t.Helper()
	out := []string{}
	for _, e := range v.Arr {
		out = append(out, e.Str)
	}
	return out
}

// TestFullLinkVectors: full links of agents with denied policies, dynamic
// toolkits (allowed, denied, with denied members, name collisions),
// augments, prototype-named tools and unicode names are byte-identical to
// the reference's, and so are the enabled tool order and the evaluated
// instructions.
func TestFullLinkVectors(t *testing.T) {
	doc := loadEvalVectors(t)
	vs := mustGet(doc, "vectors").Arr
	if len(vs) < 17 {
		t.Fatalf("only %d vectors", len(vs))
	}
	for _, vec := range vs {
		in, exp := mustGet(vec, "input"), mustGet(vec, "expected")
		t.Run(mustGet(vec, "id").Str, func(t *testing.T) {
			li, err := DecodeLinkInput(in)
			if err != nil {
				t.Fatal(err)
			}
			if li.Evaluate == nil {
				t.Fatal("a link input with only an agent declaration is not evaluated")
			}
			l, err := CreateCapabilityLink(*li)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(valueJSON(t, mustGet(exp, "link")), js(t, l)); diff != "" {
				t.Errorf("link (-want +got):\n%s", diff)
			}
			e, err := Evaluate(li.Evaluate)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(stringsOf(t, mustGet(exp, "enabledTools")), append([]string{}, e.Names()...)); diff != "" {
				t.Errorf("enabled tools (-want +got):\n%s", diff)
			}
			if got, want := e.Instructions, mustGet(exp, "instructions").Str; got != want {
				t.Errorf("instructions = %q, want %q", got, want)
			}
		})
	}
}

// TestDiffToolRefsVectors: diffToolRefs of the vectors' links, and of refs
// with duplicated and canonically equivalent keys (compared as distinct
// strings, first position and last value kept), equal the reference's.
func TestDiffToolRefsVectors(t *testing.T) {
	doc := loadEvalVectors(t)
	for i, vec := range mustGet(doc, "diffToolRefs").Arr {
		a, err := decodeToolRefs(mustGet(vec, "first"), "first")
		if err != nil {
			t.Fatal(err)
		}
		b, err := decodeToolRefs(mustGet(vec, "second"), "second")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(valueJSON(t, mustGet(vec, "expected")), js(t, DiffToolRefs(a, b))); diff != "" {
			t.Errorf("vector %d (-want +got):\n%s", i, diff)
		}
	}
}

// TestRuntimeToolBindingVectors: the runtime tool binding payload and hash
// for string bindings (empty, escapes, U+2028, astral) equal the
// reference's hashRuntimeToolBinding.
func TestRuntimeToolBindingVectors(t *testing.T) {
	doc := loadEvalVectors(t)
	for _, vec := range mustGet(doc, "runtimeToolBindings").Arr {
		base, b := mustGet(vec, "baseToolHash").Str, mustGet(vec, "runtimeBinding")
		exp := mustGet(vec, "expected")
		p, err := ToolBindingPayload(base, b)
		if err != nil {
			t.Fatal(err)
		}
		checkCanonical(t, p, exp)
		if h, err := ToolBindingHash(base, b); err != nil || h != mustGet(exp, "hash").Str {
			t.Errorf("binding %q: hash = %s, %v; want %s", b.Str, h, err, mustGet(exp, "hash").Str)
		}
	}
}

func evalLink(t *testing.T, doc string) (*CapabilityLink, *Evaluation) {
	t.Helper()
	v, err := canonical.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	li, err := DecodeLinkInput(v)
	if err != nil {
		t.Fatal(err)
	}
	l, err := CreateCapabilityLink(*li)
	if err != nil {
		t.Fatal(err)
	}
	var e *Evaluation
	if li.Evaluate != nil {
		if e, err = Evaluate(li.Evaluate); err != nil {
			t.Fatal(err)
		}
	}
	return l, e
}

// TestFullLinkRuntimeInputsKeepCreateCapabilityLink: a link input that
// states a runtime (enabledToolNames, graph, nameToStaticHash or
// toolsFallback) is createCapabilityLink's, not evaluated, so declared
// denials do not apply there.
func TestFullLinkRuntimeInputsKeepCreateCapabilityLink(t *testing.T) {
	root := `{"kind":"toolkit","name":"r","members":[{"kind":"tool","name":"a","inputSchema":{"~standard":{}},"policies":[{"id":"p","allow":false}]}]}`
	agent := `"agent":{"agentId":"x","name":"X","instructions":[],"rootComposable":` + root + `}`
	full, e := evalLink(t, `{`+agent+`}`)
	if e == nil || len(full.ToolRefs) != 0 || len(e.Tools) != 0 {
		t.Fatalf("evaluated link enables %v", full.ToolRefs)
	}
	stated, e := evalLink(t, `{`+agent+`,"enabledToolNames":["a"]}`)
	if e != nil || len(stated.ToolRefs) != 1 || stated.ToolRefs[0].ToolKey != "a" {
		t.Fatalf("stated runtime: refs %v, evaluated %v", stated.ToolRefs, e != nil)
	}
	if full.RuntimeHash == stated.RuntimeHash || full.StaticHash != stated.StaticHash {
		t.Error("the denial changed the static hash or did not change the runtime hash")
	}
}

// TestPolicyOutcomeIsNotHashed: "allow" changes evaluation only; the static
// hashes of tools and dynamic toolkits, and of a dynamic toolkit's
// "create" list, stay the reference's.
func TestPolicyOutcomeIsNotHashed(t *testing.T) {
	decode := func(s string) Composable {
		v, err := canonical.Parse([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		c, err := DecodeComposable(v)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	pairs := [][2]string{
		{`{"kind":"tool","name":"t","inputSchema":{"~standard":{}},"policies":[{"id":"p","allow":false,"executeBinding":"snapshot"}]}`,
			`{"kind":"tool","name":"t","inputSchema":{"~standard":{}},"policies":[{"id":"p","executeBinding":"snapshot"}]}`},
		{`{"kind":"dynamicToolkit","name":"d","policies":[{"id":"p","allow":false}],"create":[{"kind":"tool","name":"t","inputSchema":{"~standard":{}}}]}`,
			`{"kind":"dynamicToolkit","name":"d","policies":["p"]}`},
	}
	for _, p := range pairs {
		a, err := decode(p[0]).StaticHash()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := decode(p[1]).StaticHash()
		if a != b {
			t.Errorf("%s hashes differently from %s", p[0], p[1])
		}
	}
}

// TestEvaluateDecodeErrors: a non-boolean "allow" and a non-array "create"
// are declaration errors naming their path.
func TestEvaluateDecodeErrors(t *testing.T) {
	for doc, want := range map[string]string{
		`{"kind":"tool","name":"t","inputSchema":{"~standard":{}},"policies":[{"id":"p","allow":"no"}]}`: `$.policies[0].allow: want true or false`,
		`{"kind":"dynamicToolkit","name":"d","create":{}}`:                                               `$.create: want an array`,
		`{"kind":"dynamicToolkit","name":"d","create":[{"kind":"tool"}]}`:                                `$.create[0]: missing "name"`,
	} {
		v, err := canonical.Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		_, err = DecodeComposable(v)
		if !errors.Is(err, ErrDeclaration) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", doc, err, want)
		}
	}
}

// TestEvaluateDepthBounded: a hand-built chain of dynamic toolkits deeper
// than the decoder allows is an error, not a stack overflow.
func TestEvaluateDepthBounded(t *testing.T) {
	var c Composable = &Tool{Name: "leaf"}
	for range maxDepth + 5 {
		c = &DynamicToolkit{Name: "d", Created: []Composable{c}}
	}
	if _, err := Evaluate(c); !errors.Is(err, ErrDeclaration) {
		t.Fatalf("err = %v", err)
	}
	if _, err := Evaluate(nil); !errors.Is(err, ErrDeclaration) {
		t.Fatalf("nil root: err = %v", err)
	}
}

// TestRuntimeToolHashes: per-tool hashes show the static or evaluated base
// and the binding hash the ref carries.
func TestRuntimeToolHashes(t *testing.T) {
	doc := `{"agent":{"agentId":"a","name":"A","instructions":[],"rootComposable":{"kind":"toolkit","name":"r","members":[` +
		`{"kind":"tool","name":"s","inputSchema":{"~standard":{}}},` +
		`{"kind":"dynamicToolkit","name":"d","create":[{"kind":"tool","name":"made","inputSchema":{"~standard":{}}}]}]}},` +
		`"runtimeToolAugments":{"s":"bind"}}`
	v, _ := canonical.Parse([]byte(doc))
	li, err := DecodeLinkInput(v)
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := EvaluatedRuntime(li.Evaluate, li.Runtime.Augments)
	if err != nil {
		t.Fatal(err)
	}
	ths, err := r.ToolHashes()
	if err != nil {
		t.Fatal(err)
	}
	if len(ths) != 2 || ths[0].Name != "made" || ths[0].Static || ths[0].Augment != nil || ths[0].ToolHash != ths[0].BaseHash {
		t.Fatalf("made: %+v", ths)
	}
	want, _ := ToolBindingHash(ths[1].BaseHash, str("bind"))
	if !ths[1].Static || ths[1].Augment == nil || ths[1].ToolHash != want {
		t.Fatalf("s: %+v, want tool hash %s", ths[1], want)
	}
}

// readmeLink matches the full-link example of the README's fingerprint
// section: its input document and the runtime hash printed for it.
var readmeLink = regexp.MustCompile("(?s)\n    \\$ cat agent-denied.json\n    (\\{.*?\\})\n    \\$ capmesh hash link agent-denied.json\n.*?\"runtimeHash\": \"([0-9a-f]{64})\"")

// TestReadmeFullLink: the README shows a full link of an agent with a
// denied policy and a dynamic toolkit; its runtime hash is what capmesh
// computes for the document shown, and the same document is one of the
// reference vectors.
func TestReadmeFullLink(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := readmeLink.FindStringSubmatch(string(raw))
	if m == nil {
		t.Fatal("README has no full-link example (cat agent-denied.json / capmesh hash link agent-denied.json)")
	}
	l, _ := evalLink(t, m[1])
	if l.RuntimeHash != m[2] {
		t.Errorf("README shows runtimeHash %s; capmesh computes %s", m[2], l.RuntimeHash)
	}
	found := false
	for _, vec := range mustGet(loadEvalVectors(t), "vectors").Arr {
		if mustGet(mustGet(mustGet(vec, "expected"), "link"), "runtimeHash").Str == m[2] {
			found = true
		}
	}
	if !found {
		t.Error("the README's link is not one of the reference vectors")
	}
}
