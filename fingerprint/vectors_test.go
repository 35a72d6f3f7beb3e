package fingerprint

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/capmesh/capmesh/canonical"
	"github.com/google/go-cmp/cmp"
)

// vectorsPath is a copy of shared/spec/hashing/vectors-from-tests.json.
const vectorsPath = "testdata/vectors-from-tests.json"

func loadVectors(t *testing.T) (map[string]canonical.Value, []canonical.Value) {
	t.Helper()
	raw, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := canonical.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	vs := mustGet(doc, "vectors").Arr
	byID := map[string]canonical.Value{}
	for _, v := range vs {
		byID[mustGet(v, "id").Str] = v
	}
	return byID, vs
}

// resolve replaces a "shared/…" string reference by that vector's input.
func resolve(byID map[string]canonical.Value, v canonical.Value) canonical.Value {
	if v.Kind == canonical.String {
		if ref, ok := byID[v.Str]; ok {
			return mustGet(ref, "input")
		}
	}
	return v
}

func js(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var x any
	json.Unmarshal(b, &x)
	b, _ = json.Marshal(x)
	return string(b)
}

func valueJSON(t *testing.T, v canonical.Value) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var x any
	json.Unmarshal(b, &x)
	b, _ = json.Marshal(x)
	return string(b)
}

func checkCanonical(t *testing.T, payload canonical.Value, want canonical.Value) {
	t.Helper()
	got, err := canonical.Khoralabs.AppendCanonical(nil, payload)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(mustGet(want, "canonical").Str, string(got)); diff != "" {
		t.Errorf("canonical (-want +got):\n%s", diff)
	}
}

// TestReferenceVectors checks every vector of vectors-from-tests.json:
// canonical strings and hashes byte for byte, links, diffs and messages.
func TestReferenceVectors(t *testing.T) {
	byID, vs := loadVectors(t)
	if len(vs) < 38 {
		t.Fatalf("only %d vectors", len(vs))
	}
	for _, vec := range vs {
		id, kind := mustGet(vec, "id").Str, mustGet(vec, "kind").Str
		in, exp := mustGet(vec, "input"), mustGet(vec, "expected")
		t.Run(id, func(t *testing.T) {
			switch kind {
			case "hashPlainObject":
				inputs := []canonical.Value{in}
				if xs, ok := get(vec, "inputs"); ok {
					inputs = xs.Arr
				}
				for _, x := range inputs {
					c, _, err := Canonical(x)
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(mustGet(exp, "canonical").Str, string(c)); diff != "" {
						t.Errorf("canonical (-want +got):\n%s", diff)
					}
					h, err := HashPlainObject(x)
					if err != nil || h != mustGet(exp, "hash").Str {
						t.Errorf("hash = %s, %v; want %s", h, err, mustGet(exp, "hash").Str)
					}
				}
			case "toolStatic", "toolkitStatic":
				c, err := DecodeComposable(in)
				if err != nil {
					t.Fatal(err)
				}
				var p canonical.Value
				switch x := c.(type) {
				case *Tool:
					p, err = x.StaticPayload()
				case *Toolkit:
					p, err = x.StaticPayload()
				}
				if err != nil {
					t.Fatal(err)
				}
				checkCanonical(t, p, exp)
				if h, err := c.StaticHash(); err != nil || h != mustGet(exp, "hash").Str {
					t.Errorf("hash = %s, %v; want %s", h, err, mustGet(exp, "hash").Str)
				}
			case "toolSpecStatic":
				s, err := DecodeToolSpec(mustGet(in, "evaluatedToolSpec"), "$")
				if err != nil {
					t.Fatal(err)
				}
				p, err := s.Payload()
				if err != nil {
					t.Fatal(err)
				}
				checkCanonical(t, p, exp)
				if diff := cmp.Diff(valueJSON(t, mustGet(exp, "payload")), valueJSON(t, p)); diff != "" {
					t.Errorf("payload (-want +got):\n%s", diff)
				}
				if h, err := s.Hash(); err != nil || h != mustGet(exp, "hash").Str {
					t.Errorf("hash = %s, %v", h, err)
				}
			case "runtimeHash":
				rv := in
				if g, ok := get(in, "graph"); ok {
					rv.Obj = append(append([]canonical.Member(nil), in.Obj...), member("graph", resolve(byID, g)))
					rv.Obj = deleteKey(rv.Obj, "graph", 0)
				}
				r, err := DecodeRuntime(rv)
				if err != nil {
					t.Fatal(err)
				}
				refs, err := r.ToolRefs()
				if err != nil {
					t.Fatal(err)
				}
				if want, ok := get(exp, "toolRefs"); ok {
					if diff := cmp.Diff(valueJSON(t, want), js(t, refs)); diff != "" {
						t.Errorf("toolRefs (-want +got):\n%s", diff)
					}
				}
				checkCanonical(t, RuntimePayload(refs), exp)
				if h, err := r.Hash(); err != nil || h != mustGet(exp, "hash").Str {
					t.Errorf("hash = %s, %v", h, err)
				}
			case "invocationHash":
				var allow []string
				if o, ok := get(vec, "options"); ok {
					allow, _, _ = getStrings(o, "allowlist", "$")
				}
				n, ok, err := NormalizeInvocationContext(in, allow)
				if e, has := get(exp, "error"); has {
					if err == nil || err.Error() != e.Str {
						t.Fatalf("error = %v, want %q", err, e.Str)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if _, has := get(exp, "canonical"); !has {
					if ok {
						t.Fatalf("got a context %s, want none", valueJSON(t, n))
					}
					return
				}
				if !ok {
					t.Fatal("no context")
				}
				if want, has := get(exp, "normalized"); has {
					if diff := cmp.Diff(valueJSON(t, want), valueJSON(t, n)); diff != "" {
						t.Errorf("normalized (-want +got):\n%s", diff)
					}
				}
				checkCanonical(t, InvocationPayload(n), exp)
				if h, _, err := InvocationHash(in, allow); err != nil || h != mustGet(exp, "hash").Str {
					t.Errorf("hash = %s, %v", h, err)
				}
			case "registeredAgentStatic":
				a := in
				a.Obj = deleteKey(append([]canonical.Member(nil), in.Obj...), "rootComposable", 0)
				a.Obj = append(a.Obj, member("rootComposable", resolve(byID, mustGet(in, "rootComposable"))))
				ag, err := DecodeAgent(a)
				if err != nil {
					t.Fatal(err)
				}
				p, err := ag.StaticPayload()
				if err != nil {
					t.Fatal(err)
				}
				checkCanonical(t, p, exp)
				if h, err := ag.StaticHash(); err != nil || h != mustGet(exp, "staticHash").Str {
					t.Errorf("staticHash = %s, %v", h, err)
				}
			case "createCapabilityLink":
				li, err := DecodeLinkInput(in)
				if err != nil {
					t.Fatal(err)
				}
				l, err := CreateCapabilityLink(*li)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(valueJSON(t, mustGet(exp, "link")), js(t, l)); diff != "" {
					t.Errorf("link (-want +got):\n%s", diff)
				}
			case "computeFullCapabilityLink":
				agent := resolve(byID, mustGet(in, "agent"))
				if _, ok := get(agent, "rootComposable"); ok {
					agent.Obj = deleteKey(append([]canonical.Member(nil), agent.Obj...), "rootComposable", 0)
					agent.Obj = append(agent.Obj, member("rootComposable", resolve(byID, mustGet(resolve(byID, mustGet(in, "agent")), "rootComposable"))))
				}
				doc := new(tree).object(member("agent", agent))
				if ic, ok := get(in, "invocationContext"); ok {
					doc.Obj = append(doc.Obj, member("invocationContext", ic))
				}
				if _, ok := get(in, "augmentsA"); ok {
					for _, side := range []string{"A", "B"} {
						d := doc
						d.Obj = append(append([]canonical.Member(nil), doc.Obj...), member("runtimeToolAugments", mustGet(in, "augments"+side)))
						li, err := DecodeLinkInput(d)
						if err != nil {
							t.Fatal(err)
						}
						l, err := CreateCapabilityLink(*li)
						if err != nil {
							t.Fatal(err)
						}
						if diff := cmp.Diff(valueJSON(t, mustGet(exp, "link"+side)), js(t, l)); diff != "" {
							t.Errorf("link%s (-want +got):\n%s", side, diff)
						}
					}
					bp, _ := ToolBindingPayload(mustGet(exp, "memorySearchStaticHash").Str, mustGet(mustGet(in, "augmentsA"), "memory_search"))
					checkCanonical(t, bp, new(tree).object(member("canonical", mustGet(exp, "bindingCanonicalA"))))
					return
				}
				li, err := DecodeLinkInput(doc)
				if err != nil {
					t.Fatal(err)
				}
				l, err := CreateCapabilityLink(*li)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(valueJSON(t, mustGet(exp, "link")), js(t, l)); diff != "" {
					t.Errorf("link (-want +got):\n%s", diff)
				}
			case "formatHashShort":
				for i, args := range in.Arr {
					if got, want := FormatHashShort(args.Arr[0].Str), exp.Arr[i].Str; got != want {
						t.Errorf("FormatHashShort(%q) = %q, want %q", args.Arr[0].Str, got, want)
					}
				}
			case "diffToolRefs":
				a, _ := decodeToolRefs(mustGet(in, "first"), "first")
				b, _ := decodeToolRefs(mustGet(in, "second"), "second")
				if diff := cmp.Diff(valueJSON(t, exp), js(t, DiffToolRefs(a, b))); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			case "diffCapabilityLinks", "explainCapabilityLinkRelationship":
				a, err := DecodeLink(mustGet(in, "a"))
				if err != nil {
					t.Fatal(err)
				}
				b, err := DecodeLink(mustGet(in, "b"))
				if err != nil {
					t.Fatal(err)
				}
				if kind == "diffCapabilityLinks" {
					if diff := cmp.Diff(valueJSON(t, exp), js(t, DiffCapabilityLinks(a, b))); diff != "" {
						t.Errorf("(-want +got):\n%s", diff)
					}
				} else if got := ExplainCapabilityLinkRelationship(a, b); got != exp.Str {
					t.Errorf("got %q, want %q", got, exp.Str)
				}
			case "diffPolicyEvaluationSnapshots":
				got := DiffPolicyEvaluationSnapshots(mustGet(mustGet(in, "first"), "results"), mustGet(mustGet(in, "second"), "results"))
				if diff := cmp.Diff(valueJSON(t, exp), js(t, got)); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			case "diffAffordancePolicyIds":
				got := DiffAffordancePolicyIDs(affordances(mustGet(in, "first")), affordances(mustGet(in, "second")))
				if diff := cmp.Diff(valueJSON(t, exp), js(t, got)); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			default:
				t.Fatalf("unhandled vector kind %q", kind)
			}
		})
	}
}

func affordances(v canonical.Value) map[string][]string {
	out := map[string][]string{}
	for _, m := range v.Obj {
		ids, _, _ := getStrings(m.Value, "policyIds", "$")
		out[m.Key] = ids
	}
	return out
}

func deleteKey(ms []canonical.Member, key string, _ int) []canonical.Member {
	out := ms[:0]
	for _, m := range ms {
		if m.Key != key {
			out = append(out, m)
		}
	}
	return out
}
