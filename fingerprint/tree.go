package fingerprint

import (
	"slices"
	"sync"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/canonical/collate"
)

// tree supplies the arrays and objects of the payload trees being built,
// cut from two backing slices rather than allocated one by one. Every
// payload builder takes one: StaticPayload and the other exported *Payload
// functions pass a fresh tree, whose nodes the caller then owns; the hash
// functions pass a pooled tree and recycle it once the payload's bytes are
// hashed (see hashTree), so that hashing a declaration allocates little
// more than its hex digest. The builders, the payloads and the bytes are
// the same either way.
type tree struct {
	vals []canonical.Value
	mems []canonical.Member
	// sorter and perm are the scratch space of collationOrder.
	sorter collate.Sorter
	perm   []int32
}

// values returns n zero elements for an array.
func (t *tree) values(n int) []canonical.Value {
	if cap(t.vals)-len(t.vals) < n {
		// A new backing slice; the nodes already handed out keep the old
		// one alive, so nothing moves under them.
		t.vals = make([]canonical.Value, 0, max(n, 2*cap(t.vals)))
	}
	i := len(t.vals)
	t.vals = t.vals[:i+n]
	return t.vals[i : i+n : i+n]
}

// members returns an empty member list with room for n members, for an
// object whose members are appended one by one.
func (t *tree) members(n int) []canonical.Member {
	if cap(t.mems)-len(t.mems) < n {
		t.mems = make([]canonical.Member, 0, max(n, 2*cap(t.mems)))
	}
	i := len(t.mems)
	t.mems = t.mems[:i+n]
	return t.mems[i : i : i+n]
}

// object is the object of the members ms (in the order given; the
// khoralabs writer orders them), copied into the tree.
func (t *tree) object(ms ...canonical.Member) canonical.Value {
	return canonical.Value{Kind: canonical.Object, Obj: append(t.members(len(ms)), ms...)}
}

// strings is the array of the strings ss, in their order.
func (t *tree) strings(ss []string) canonical.Value {
	arr := t.values(len(ss))
	for i, s := range ss {
		arr[i] = str(s)
	}
	return canonical.Value{Kind: canonical.Array, Arr: arr}
}

// sortedStrings is the array of the strings ss stable-sorted by collation.
func (t *tree) sortedStrings(ss []string) canonical.Value {
	v := t.strings(ss)
	slices.SortStableFunc(v.Arr, func(a, b canonical.Value) int { return collate.Compare(a.Str, b.Str) })
	return v
}

// collationOrder returns the indexes of names in their stable collation
// order, valid until the next call. A collate.Sorter settles most pairs of
// a long list by comparing precomputed prefixes instead of collating the
// two strings again, which is what a toolkit's member list needs.
func (t *tree) collationOrder(names []string) []int32 {
	t.perm = t.perm[:0]
	for i := range names {
		t.perm = append(t.perm, int32(i))
	}
	t.sorter.Sort(t.perm, names)
	return t.perm
}

// reset forgets every node (clearing them, so a pooled tree keeps no
// declaration alive) and keeps the backing slices for the next payload.
func (t *tree) reset() {
	clear(t.vals)
	clear(t.mems)
	t.vals, t.mems = t.vals[:0], t.mems[:0]
}

// maxPooledNodes bounds the trees kept for reuse (a tool's payload takes
// about 20 nodes, a toolkit of 20 members about 65), so that one huge
// payload does not stay in memory.
const maxPooledNodes = 1024

var treePool = sync.Pool{New: func() any { return new(tree) }}

// hashTree hashes the payload build makes in a pooled tree (see
// hashPayload for kind and name), then recycles the tree.
func hashTree(kind, name string, build func(*tree) (canonical.Value, error)) (string, error) {
	t := treePool.Get().(*tree)
	p, err := build(t)
	h, err := hashPayload(kind, name, p, err)
	t.reset()
	if cap(t.vals) <= maxPooledNodes && cap(t.mems) <= maxPooledNodes && cap(t.perm) <= maxPooledNodes {
		treePool.Put(t)
	}
	return h, err
}
