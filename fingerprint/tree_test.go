package fingerprint

import (
	"slices"
	"testing"

	"github.com/capmesh/capmesh/canonical/collate"
)

// TestPayloadsOutliveHashing: a payload returned by StaticPayload is the
// caller's: hashing other declarations afterwards (which build their
// payloads in pooled trees) leaves it as it was, and it still hashes to
// the declaration's hash.
func TestPayloadsOutliveHashing(t *testing.T) {
	tool := benchTool(1)
	kit := benchToolkit()
	p, err := tool.StaticPayload()
	if err != nil {
		t.Fatal(err)
	}
	before, err := p.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := benchTool(i).StaticHash(); err != nil {
			t.Fatal(err)
		}
		if _, err := kit.StaticHash(); err != nil {
			t.Fatal(err)
		}
	}
	after, _ := p.AppendJSON(nil)
	if string(after) != string(before) {
		t.Fatalf("payload changed after hashing others:\nbefore %s\nafter  %s", before, after)
	}
	want, err := tool.StaticHash()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := HashPlainObject(p); got != want {
		t.Fatalf("hash of the kept payload %s, StaticHash %s", got, want)
	}
}

// TestTreeResetForgetsNodes: a tree returned to the pool holds no node of
// the payload it built, so it keeps no declaration's strings alive.
func TestTreeResetForgetsNodes(t *testing.T) {
	var tr tree
	if _, err := benchTool(1).payload(&tr); err != nil {
		t.Fatal(err)
	}
	if len(tr.vals) == 0 || len(tr.mems) == 0 {
		t.Fatalf("the tool payload used %d values and %d members of the tree, want some of each", len(tr.vals), len(tr.mems))
	}
	tr.reset()
	for i, v := range tr.vals[:cap(tr.vals)] {
		if v.Str != "" || v.Arr != nil || v.Obj != nil {
			t.Fatalf("value %d kept after reset: %+v", i, v)
		}
	}
	for i, m := range tr.mems[:cap(tr.mems)] {
		if m.Key != "" || m.Value.Str != "" || m.Value.Obj != nil {
			t.Fatalf("member %d kept after reset: %+v", i, m)
		}
	}
}

// TestStaticHashAllocatesOnlyTheDigest: a tool's hash builds its payload
// in a pooled tree and writes it into a pooled buffer, so the one
// allocation left is the hex string it returns (14 before the pooled
// tree).
func TestStaticHashAllocatesOnlyTheDigest(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	tool := benchTool(1)
	spec := tool.Evaluate()
	for _, c := range []struct {
		name string
		hash func() (string, error)
		want float64
	}{
		{"Tool.StaticHash", tool.StaticHash, 1},
		// An evaluated spec also splits its instruction text into lines.
		{"ToolSpec.Hash", spec.Hash, 2},
		{"ToolSpecWire.Hash", spec.Wire().Hash, 2},
	} {
		if n := testing.AllocsPerRun(100, func() { c.hash() }); n > c.want {
			t.Errorf("%s: %v allocations per hash, want %v", c.name, n, c.want)
		}
	}
	// A toolkit adds its members' digests and the lists of their names
	// and hashes.
	kit := benchToolkit()
	if n, want := testing.AllocsPerRun(20, func() { kit.StaticHash() }), len(kit.Members)+3; n > float64(want) {
		t.Errorf("Toolkit.StaticHash of %d tools: %v allocations, want ≤ %d", len(kit.Members), n, want)
	}
}

// TestToolkitMembersInCollationOrder: a toolkit lists its members stably
// sorted by name in collation order, for long lists (which the sorter
// settles by prefixes) with non-ASCII names and names that collate equal
// alike.
func TestToolkitMembersInCollationOrder(t *testing.T) {
	names := []string{"zeta", "é", "tool_10", "Tool_2", "e\u0301", "tool_1", "ab", "a", "_x", "-x", "10", "9", "Émile", "emile", "ß", "ss", "😀", "z", "tool_02", "A", "b"}
	kit := &Toolkit{Name: "k"}
	for i, n := range names {
		tool := benchTool(i)
		tool.Name = n
		kit.Members = append(kit.Members, tool)
	}
	p, err := kit.StaticPayload()
	if err != nil {
		t.Fatal(err)
	}
	members, _ := p.Get("members")
	var got []string
	for _, m := range members.Arr {
		n, _ := m.Get("name")
		got = append(got, n.Str)
	}
	want := slices.Clone(names)
	slices.SortStableFunc(want, collate.Compare)
	if !slices.Equal(got, want) {
		t.Fatalf("members in order %q, want %q", got, want)
	}
}
