package fingerprint

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/capmesh/capmesh/canonical"
)

// TestHashErrors: invalid UTF-8 in a hand-built declaration and a BigInt
// schema are errors, not hashes, and a later hash is unaffected by them.
func TestHashErrors(t *testing.T) {
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
	ok := &Tool{Name: "t", InputSchema: StandardSchema("test", 1)}
	if h, err := ok.StaticHash(); err != nil || h != "b970130432bde167a1a7ffb163c46fc0582e960bef0ee8cb4235f2b04507ee23" {
		t.Errorf("after errors: %s, %v", h, err)
	}
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
