package merkle

import (
	"fmt"
	"math/bits"
	"sync"
)

// Tree is an append-only Merkle tree of leaf hashes. It keeps the hash of
// every complete perfect subtree: level k holds, for each aligned run of
// 2^k leaves already appended, the hash of that run. Every RFC 9162 subtree
// a proof needs is then either one stored hash or, for the ragged right
// edge of a tree size, a fold of at most log n stored hashes.
//
// The zero Tree is empty and ready to use. A Tree is safe for concurrent
// use: appends serialise, proofs and roots share a read lock.
type Tree struct {
	mu sync.RWMutex
	// levels[k][i] is the hash of leaves [i·2^k, (i+1)·2^k); levels[0]
	// are the leaf hashes themselves.
	levels [][]Hash
}

// NewTree returns an empty tree with room for capacity leaves before its
// storage grows. The zero Tree is equally valid.
func NewTree(capacity int) *Tree {
	t := &Tree{}
	for c := capacity; c > 0; c >>= 1 {
		t.levels = append(t.levels, make([]Hash, 0, c))
	}
	return t
}

// Size is the number of leaves appended so far.
func (t *Tree) Size() uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.size()
}

func (t *Tree) size() uint64 {
	if len(t.levels) == 0 {
		return 0
	}
	return uint64(len(t.levels[0]))
}

// Append adds a leaf hash (see LeafHash) and returns its index. It hashes
// one interior node for every perfect subtree the new leaf completes:
// amortised one, at most log2 of the new size.
func (t *Tree) Append(leaf Hash) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	index := t.size()
	h, i := leaf, index
	for k := 0; ; k++ {
		if k == len(t.levels) {
			t.levels = append(t.levels, nil)
		}
		t.levels[k] = append(t.levels[k], h)
		if i&1 == 0 {
			return index
		}
		h = NodeHash(t.levels[k][i-1], h)
		i >>= 1
	}
}

// Leaf returns the leaf hash at index.
func (t *Tree) Leaf(index uint64) (Hash, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if index >= t.size() {
		return Hash{}, fmt.Errorf("%w: leaf %d of a tree of %d", ErrOutOfRange, index, t.size())
	}
	return t.levels[0][index], nil
}

// Root is the root hash of the tree at its current size.
func (t *Tree) Root() Hash {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.mth(0, t.size())
}

// RootAt is the root hash the tree had when it held size leaves:
// MTH(D[0:size]). RootAt(0) is EmptyRoot.
func (t *Tree) RootAt(size uint64) (Hash, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if size > t.size() {
		return Hash{}, fmt.Errorf("%w: tree size %d past the tree's %d", ErrOutOfRange, size, t.size())
	}
	return t.mth(0, size), nil
}

// mth is MTH(D[lo:hi]) for a range RFC 9162's recursion produces: lo is a
// multiple of the smallest power of two not below hi-lo, and hi is at most
// the tree's size. Such a range is a row of perfect subtrees whose sizes
// are the set bits of hi-lo, largest first; MTH folds them from the right,
// H(c1, H(c2, ... H(cj-1, cj))), exactly the RFC's split at the largest
// power of two below the size.
func (t *Tree) mth(lo, hi uint64) Hash {
	if lo == hi {
		return EmptyRoot()
	}
	var h Hash
	end := hi
	for n := hi - lo; n != 0; n &= n - 1 {
		k := bits.TrailingZeros64(n)
		start := end - 1<<k
		c := t.levels[k][start>>k]
		if end == hi {
			h = c
		} else {
			h = NodeHash(c, h)
		}
		end = start
	}
	return h
}

// split is k of RFC 9162 §2.1.1: the largest power of two smaller than n,
// for n > 1.
func split(n uint64) uint64 { return 1 << (bits.Len64(n-1) - 1) }
