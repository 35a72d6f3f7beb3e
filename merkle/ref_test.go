package merkle

import "encoding/binary"

// This file is an independent reference: RFC 9162 §2.1's definitions
// transcribed as literally as Go allows, over a plain slice of leaf hashes,
// with none of Tree's stored levels. Tests compare Tree against it.

// refSplit is the largest power of two smaller than n (n > 1), by counting.
func refSplit(n int) int {
	k := 1
	for k*2 < n {
		k *= 2
	}
	return k
}

// refMTH is MTH(D[n]) of §2.1.1.
func refMTH(d []Hash) Hash {
	switch len(d) {
	case 0:
		return EmptyRoot()
	case 1:
		return d[0]
	}
	k := refSplit(len(d))
	return NodeHash(refMTH(d[:k]), refMTH(d[k:]))
}

// refPath is PATH(m, D[n]) of §2.1.3.1.
func refPath(m int, d []Hash) []Hash {
	if len(d) <= 1 {
		return nil
	}
	k := refSplit(len(d))
	if m < k {
		return append(refPath(m, d[:k]), refMTH(d[k:]))
	}
	return append(refPath(m-k, d[k:]), refMTH(d[:k]))
}

// refProof is PROOF(m, D[n]) of §2.1.4.1.
func refProof(m int, d []Hash) []Hash { return refSubproof(m, d, true) }

func refSubproof(m int, d []Hash, b bool) []Hash {
	if m == len(d) {
		if b {
			return nil
		}
		return []Hash{refMTH(d)}
	}
	k := refSplit(len(d))
	if m <= k {
		return append(refSubproof(m, d[:k], b), refMTH(d[k:]))
	}
	return append(refSubproof(m-k, d[k:], false), refMTH(d[:k]))
}

// refRoots returns MTH(D[0:n]) for every n from 0 to len(d) in O(len(d))
// hashes, with a stack of perfect subtrees (a compact range), again without
// Tree's code.
func refRoots(d []Hash) []Hash {
	type node struct {
		size int
		h    Hash
	}
	var stack []node
	roots := []Hash{EmptyRoot()}
	for _, leaf := range d {
		stack = append(stack, node{1, leaf})
		for len(stack) > 1 && stack[len(stack)-2].size == stack[len(stack)-1].size {
			l, r := stack[len(stack)-2], stack[len(stack)-1]
			stack = append(stack[:len(stack)-2], node{2 * l.size, NodeHash(l.h, r.h)})
		}
		root := stack[len(stack)-1].h
		for i := len(stack) - 2; i >= 0; i-- {
			root = NodeHash(stack[i].h, root)
		}
		roots = append(roots, root)
	}
	return roots
}

// testLeaves returns n distinct leaf hashes: LeafHash of each index.
func testLeaves(n int) []Hash {
	d := make([]Hash, n)
	for i := range d {
		d[i] = LeafHash(binary.BigEndian.AppendUint64(nil, uint64(i)))
	}
	return d
}

// treeOf builds a Tree holding d.
func treeOf(d []Hash) *Tree {
	t := NewTree(len(d))
	for _, h := range d {
		t.Append(h)
	}
	return t
}
