package fingerprint

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/canonical/collate"
	"github.com/google/go-cmp/cmp"
)

// TestFieldOrders: the field orders the direct writers hard-code are the
// khoralabs (collation) order of those keys.
func TestFieldOrders(t *testing.T) {
	for _, keys := range [][]string{
		{"description", "instructions", "kind", "name", "policies", "policyBindings", "schema"},
		{"executeBinding", "id"},
		{"vendor", "version"},
		{"instructions", "kind", "members", "name"},
		{"hash", "name"},
		{"instructions", "kind", "name", "policies"},
		{"agentInstructions", "rootComposableHash"},
		{"kind", "tools"},
		{"baseToolHash", "kind", "runtimeBinding"},
		{"context", "kind"},
	} {
		if !slices.IsSortedFunc(keys, collate.Compare) {
			t.Errorf("%q is not in collation order", keys)
		}
	}
}

// treeBytes is the khoralabs form of a payload built as a tree: the
// reference path the direct writers must agree with.
func treeBytes(t testing.TB, p canonical.Value, err error) (string, error) {
	t.Helper()
	if err != nil {
		return "", err
	}
	out, err := canonical.Khoralabs.AppendCanonical(nil, p)
	return string(out), err
}

// directBytes runs a direct writer and returns what it wrote.
func directBytes(write func(h *hasher) error) (string, error) {
	h := getHasher()
	defer putHasher(h)
	if err := write(h); err != nil {
		return "", err
	}
	return string(h.b), nil
}

// checkDirect compares a direct writer with the tree path: same bytes, or
// both fail.
func checkDirect(t *testing.T, what string, tree func() (canonical.Value, error), write func(h *hasher) error) {
	t.Helper()
	p, perr := tree()
	want, werr := treeBytes(t, p, perr)
	got, gerr := directBytes(write)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%s: direct writer error %v, tree path error %v", what, gerr, werr)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%s: direct writer differs from the tree path (-tree +direct):\n%s", what, diff)
	}
}

// randomText draws strings that exercise collation ties, escaping and the
// non-ASCII sort paths.
func randomText(r *rand.Rand) string {
	atoms := []string{"a", "A", "b", "é", "e\u0301", "_", "-", " ", "0", "10", "2", "\u0001", "\"", "\\", "\n", "\u2028", "😀", "日本", "policy", "tool", "Prefer recent documents.", "x\xed\xa0\x80"}
	var s string
	for range r.IntN(4) {
		s += atoms[r.IntN(len(atoms))]
	}
	return s
}

func randomStrings(r *rand.Rand) []string {
	if r.IntN(5) == 0 {
		return nil
	}
	ss := make([]string, r.IntN(20))
	for i := range ss {
		ss[i] = randomText(r)
	}
	return ss
}

func randomSchema(r *rand.Rand) Schema {
	switch r.IntN(6) {
	case 0:
		return JSONSchema(Undefined)
	case 1:
		v := canonical.Value{Kind: canonical.Object, Obj: []canonical.Member{
			{Key: "type", Value: str("object")}, {Key: "10", Value: null}, {Key: "é", Value: str("x")},
			{Key: "x", Value: canonical.Value{Kind: canonical.Object, Obj: []canonical.Member{{Key: markNumber, Value: str("-0")}}}},
			{Key: "u", Value: Undefined}}}
		return JSONSchema(v)
	case 2:
		return JSONSchema(canonical.Value{Kind: canonical.Object, Obj: []canonical.Member{{Key: "required", Value: strArray([]string{"b", "a"})}, {Key: "$schema", Value: str("s")}}})
	case 3:
		ver := canonical.Value{Kind: canonical.Number, Str: "1.50"}
		return Schema{Version: &ver}
	case 4:
		v := randomText(r)
		return Schema{Vendor: &v, Version: &Undefined}
	}
	return StandardSchema(randomText(r), r.IntN(3))
}

func randomTool(r *rand.Rand) *Tool {
	t := &Tool{Name: randomText(r), InputSchema: randomSchema(r), Instructions: randomStrings(r)}
	if r.IntN(2) == 0 {
		d := randomText(r)
		t.Description = &d
	}
	for range r.IntN(6) {
		p := Policy{ID: randomText(r)}
		if r.IntN(2) == 0 {
			eb := randomText(r)
			p.ExecuteBinding = &eb
		}
		t.Policies = append(t.Policies, p)
	}
	return t
}

func randomComposable(r *rand.Rand, depth int) Composable {
	switch k := r.IntN(5); {
	case k == 0 && depth < 3:
		kit := &Toolkit{Name: randomText(r), Instructions: randomStrings(r)}
		for range r.IntN(25) {
			kit.Members = append(kit.Members, randomComposable(r, depth+1))
		}
		return kit
	case k == 1:
		d := &DynamicToolkit{Name: randomText(r), Instructions: randomStrings(r)}
		for range r.IntN(5) {
			d.Policies = append(d.Policies, Policy{ID: randomText(r)})
		}
		return d
	}
	return randomTool(r)
}

// TestDirectWriters: every direct writer produces exactly the khoralabs
// bytes of its *Payload tree, over random declarations with ties, escapes,
// non-ASCII names, index-like keys, markers and undefined schemas.
func TestDirectWriters(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for i := range 3000 {
		c := randomComposable(r, 0)
		switch x := c.(type) {
		case *Tool:
			checkDirect(t, fmt.Sprintf("tool %d", i), x.StaticPayload, x.appendStatic)
			s := x.Evaluate()
			checkDirect(t, fmt.Sprintf("spec %d", i), s.Payload, func(h *hasher) error {
				return h.appendSpec(s.Name, s.Description, s.InputSchema, splitLines(s.Instructions), s.PolicyIDs)
			})
			w := s.Wire()
			checkDirect(t, fmt.Sprintf("wire %d", i), w.Payload, func(h *hasher) error {
				return h.appendSpec(w.Name, wireDescription(w.Description), w.InputSchema, splitLines(w.Instructions), sortedStrings(w.PolicyIDs))
			})
			// The public hashes agree with hashing the tree.
			for _, pair := range []struct {
				hash func() (string, error)
				tree func() (canonical.Value, error)
			}{{x.StaticHash, x.StaticPayload}, {s.Hash, s.Payload}, {w.Hash, w.Payload}} {
				want, werr := hashTree(pair.tree())
				got, gerr := pair.hash()
				if got != want || (werr == nil) != (gerr == nil) {
					t.Fatalf("tool %d: hash %s (%v), tree %s (%v)", i, got, gerr, want, werr)
				}
			}
		case *Toolkit:
			checkDirect(t, fmt.Sprintf("toolkit %d", i), x.StaticPayload, x.appendStatic)
		case *DynamicToolkit:
			checkDirect(t, fmt.Sprintf("dynamic toolkit %d", i), x.StaticPayload, x.appendStatic)
		}
		a := &RegisteredAgent{AgentID: "a", Root: c, Instructions: randomStrings(r)}
		a.Instructions = append(a.Instructions, " \ufeff"+randomText(r)+"\u3000 ", "\u0085")
		checkDirect(t, fmt.Sprintf("agent %d", i), a.StaticPayload, a.appendStatic)
		var refs []ToolRef
		for range r.IntN(6) {
			refs = append(refs, ToolRef{ToolKey: randomText(r), ToolHash: randomText(r)})
		}
		checkDirect(t, fmt.Sprintf("runtime %d", i), func() (canonical.Value, error) { return RuntimePayload(refs), nil },
			func(h *hasher) error { return h.appendRuntime(refs) })
		binding := randomBinding(r)
		base := randomText(r)
		checkDirect(t, fmt.Sprintf("binding %d", i), func() (canonical.Value, error) { return ToolBindingPayload(base, binding) },
			func(h *hasher) error { return h.appendBinding(base, &binding) })
		if ctx, ok, err := NormalizeInvocationContext(binding, nil); err == nil && ok {
			checkDirect(t, fmt.Sprintf("invocation %d", i), func() (canonical.Value, error) { return InvocationPayload(ctx), nil },
				func(h *hasher) error { return h.appendInvocation(&ctx) })
		}
	}
}

// randomBinding draws a runtime binding or invocation context: any JSON
// value, markers included.
func randomBinding(r *rand.Rand) canonical.Value {
	switch r.IntN(7) {
	case 0:
		return Undefined
	case 1:
		return str(randomText(r))
	case 2:
		return canonical.Value{Kind: canonical.Number, Str: "1.50"}
	case 3:
		return canonical.Value{Kind: canonical.Object, Obj: []canonical.Member{{Key: markFunction, Value: str("f")}}}
	}
	obj := canonical.Value{Kind: canonical.Object}
	seen := map[string]bool{}
	for range r.IntN(8) {
		k := randomText(r)
		if seen[k] {
			continue
		}
		seen[k] = true
		var v canonical.Value
		switch r.IntN(4) {
		case 0:
			v = Undefined
		case 1:
			v = canonical.Value{Kind: canonical.Object, Obj: []canonical.Member{{Key: markDate, Value: str("2024-01-02T03:04:05.000Z")}}}
		case 2:
			v = strArray(randomStrings(r))
		default:
			v = canonical.Value{Kind: canonical.Number, Str: "-0"}
		}
		obj.Obj = append(obj.Obj, canonical.Member{Key: k, Value: v})
	}
	return obj
}

// hashTree hashes the khoralabs form of a payload tree.
func hashTree(p canonical.Value, err error) (string, error) {
	if err != nil {
		return "", err
	}
	sum, err := canonical.HashValue(canonical.Khoralabs, p)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(sum[:]), nil
}

// TestDirectWriterErrors: invalid UTF-8 in a hand-built declaration and a
// BigInt schema are errors on the direct path too.
func TestDirectWriterErrors(t *testing.T) {
	bad := &Tool{Name: "t\xff", InputSchema: StandardSchema("v", 1)}
	if _, err := bad.StaticHash(); !errors.Is(err, canonical.ErrInvalidUTF8) {
		t.Errorf("invalid UTF-8 name: err = %v, want ErrInvalidUTF8", err)
	}
	kit := &Toolkit{Name: "k", Members: []Composable{&Tool{Name: "ok", InputSchema: StandardSchema("v", 1), Instructions: []string{"\xc3"}}}}
	if _, err := kit.StaticHash(); !errors.Is(err, canonical.ErrInvalidUTF8) {
		t.Errorf("invalid UTF-8 member instruction: err = %v, want ErrInvalidUTF8", err)
	}
	big := canonical.Value{Kind: canonical.Object, Obj: []canonical.Member{{Key: "n", Value: canonical.Value{Kind: canonical.Object, Obj: []canonical.Member{{Key: markBigInt, Value: str("1")}}}}}}
	if _, err := (&Tool{Name: "t", InputSchema: JSONSchema(big)}).StaticHash(); !errors.Is(err, ErrNotSerializable) {
		t.Errorf("BigInt in schema: err = %v, want ErrNotSerializable", err)
	}
	// A failed hash leaves nothing behind in the pooled buffers.
	ok := &Tool{Name: "t", InputSchema: StandardSchema("test", 1)}
	if h, err := ok.StaticHash(); err != nil || h != "b970130432bde167a1a7ffb163c46fc0582e960bef0ee8cb4235f2b04507ee23" {
		t.Errorf("after errors: %s, %v", h, err)
	}
}

// FuzzDirectWriters: for any declaration document that decodes, the direct
// writers and the tree path agree byte for byte.
func FuzzDirectWriters(f *testing.F) {
	for _, s := range []string{
		`{"kind":"tool","name":"t","inputSchema":{"~standard":{"vendor":"test","version":1}}}`,
		`{"kind":"tool","name":"é","description":"","instructions":["b","B","","e\u0301","é"],"policies":[{"id":"b","executeBinding":"hint"},"a","_x","a"],"inputSchema":{"toJSONSchema":{"type":"object","10":1,"2":{"$number":"-0"}}}}`,
		`{"kind":"toolkit","name":"k","instructions":["z"," a "],"members":[{"kind":"tool","name":"b","inputSchema":{"~standard":{"vendor":"v"}}},{"kind":"dynamicToolkit","name":"A","policies":["z","a"]}]}`,
		`{"kind":"tool","name":"t","inputSchema":{"toJSONSchema":{"$undefined":true}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := canonical.Parse(data)
		if err != nil {
			return
		}
		c, err := DecodeComposable(v)
		if err != nil {
			return
		}
		switch x := c.(type) {
		case *Tool:
			checkDirect(t, "tool", x.StaticPayload, x.appendStatic)
			s := x.Evaluate()
			checkDirect(t, "spec", s.Payload, func(h *hasher) error {
				return h.appendSpec(s.Name, s.Description, s.InputSchema, splitLines(s.Instructions), s.PolicyIDs)
			})
		case *Toolkit:
			checkDirect(t, "toolkit", x.StaticPayload, x.appendStatic)
		case *DynamicToolkit:
			checkDirect(t, "dynamic toolkit", x.StaticPayload, x.appendStatic)
		}
	})
}

// TestBenchInputsMatchNode: the benchmark inputs hash as Node hashes them
// (testdata/bench/hashes.json, written by testdata/bench/node.mjs), so the
// figures compare like with like.
func TestBenchInputsMatchNode(t *testing.T) {
	raw, err := os.ReadFile("testdata/bench/hashes.json")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]string
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	v, err := canonical.Parse(benchObject)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]func() (string, error){
		"object":    func() (string, error) { return HashPlainObject(v) },
		"tool":      benchTool(1).StaticHash,
		"toolkit20": benchToolkit().StaticHash,
	}
	for name, f := range got {
		h, err := f()
		if err != nil || h != want[name] {
			t.Errorf("%s: %s, %v; node %s", name, h, err, want[name])
		}
	}
}

// TestHashesFollowMutation: hashes are not cached on declarations, whose
// fields are exported and mutable; changing a member changes the toolkit's
// hash at once, and changing it back restores it.
func TestHashesFollowMutation(t *testing.T) {
	k := benchToolkit()
	before, err := k.StaticHash()
	if err != nil {
		t.Fatal(err)
	}
	tool := k.Members[3].(*Tool)
	tool.Instructions[0] = "Prefer old documents."
	after, err := k.StaticHash()
	if err != nil {
		t.Fatal(err)
	}
	if after == before {
		t.Fatal("toolkit hash unchanged after a member's instruction changed")
	}
	tool.Instructions[0] = "Prefer recent documents."
	if again, _ := k.StaticHash(); again != before {
		t.Fatalf("hash %s after restoring, want %s", again, before)
	}
}

// TestHexDigest: the word-wise hex writer agrees with encoding/hex on
// every byte value in every position of the digest.
func TestHexDigest(t *testing.T) {
	var sum [32]byte
	for c := range 256 {
		for i := range sum {
			sum[i] = byte(c + 7*i)
		}
		if got, want := hexDigest(&sum), hex.EncodeToString(sum[:]); got != want {
			t.Fatalf("hexDigest(% x) = %s, want %s", sum, got, want)
		}
	}
}

// TestPlainObjectFollowsTreeEdits: nothing about a parsed tree is trusted
// past its exported fields — a string edited to need an escape, a key
// edited to change the member order — so a hash after edits equals the
// hash of the edited document parsed afresh.
func TestPlainObjectFollowsTreeEdits(t *testing.T) {
	v, err := canonical.Parse([]byte(`{"b":"plain","a":"text","n":12.5}`))
	if err != nil {
		t.Fatal(err)
	}
	before, err := HashPlainObject(v)
	if err != nil {
		t.Fatal(err)
	}
	v.Obj[0].Value.Str = "now \"quoted\"\n"
	v.Obj[1].Key = "c"
	v.Obj[2].Value.Str = "1.50"
	got, err := HashPlainObject(v)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := canonical.Parse([]byte(`{"b":"now \"quoted\"\n","c":"text","n":1.50}`))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := HashPlainObject(fresh)
	if got != want || got == before {
		t.Fatalf("after edits %s, parsed afresh %s (before %s)", got, want, before)
	}
	if c, _, _ := Canonical(v); string(c) != `{"b":"now \"quoted\"\n","c":"text","n":1.5}` {
		t.Fatalf("canonical after edits %s", c)
	}
}
