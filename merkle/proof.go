package merkle

import "fmt"

// MaxPathLen bounds the hashes in a proof. Sizes are at most MaxSize
// (2^53-1), so an inclusion path has at most 53 hashes and a consistency
// path at most 54; a longer path is refused before any hashing.
const MaxPathLen = 64

// MaxSize is the largest tree size and leaf index the package accepts in
// its JSON form: 2^53-1, the largest integer every JSON implementation
// reads exactly (RFC 7493 I-JSON).
const MaxSize = 1<<53 - 1

// InclusionProof proves that leaf LeafIndex is in the tree of TreeSize
// leaves: RFC 9162 §2.1.3's inclusion path, deepest sibling first.
type InclusionProof struct {
	LeafIndex uint64
	TreeSize  uint64
	Path      []Hash
}

// ConsistencyProof proves that the tree of TreeSize1 leaves is a prefix of
// the tree of TreeSize2 leaves: RFC 9162 §2.1.4's consistency path.
type ConsistencyProof struct {
	TreeSize1 uint64
	TreeSize2 uint64
	Path      []Hash
}

// InclusionProof returns the inclusion proof of leaf index in the tree as
// it was at size leaves, for any size up to the current one: RFC 9162
// §2.1.3.1 PATH(index, D[0:size]).
func (t *Tree) InclusionProof(index, size uint64) (InclusionProof, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if size > t.size() {
		return InclusionProof{}, fmt.Errorf("%w: tree size %d past the tree's %d", ErrOutOfRange, size, t.size())
	}
	if index >= size {
		return InclusionProof{}, fmt.Errorf("%w: leaf %d of a tree of %d", ErrOutOfRange, index, size)
	}
	path := make([]Hash, 0, bitsLen(size))
	path = t.path(path, index, 0, size)
	return InclusionProof{LeafIndex: index, TreeSize: size, Path: path}, nil
}

// path appends PATH(m, D[lo:hi]) to dst: the proof for D[lo:k] or D[k:hi],
// whichever holds m, followed by the other half's hash.
func (t *Tree) path(dst []Hash, m, lo, hi uint64) []Hash {
	if hi-lo <= 1 {
		return dst
	}
	k := split(hi - lo)
	if m < lo+k {
		return append(t.path(dst, m, lo, lo+k), t.mth(lo+k, hi))
	}
	return append(t.path(dst, m, lo+k, hi), t.mth(lo, lo+k))
}

// ConsistencyProof returns the consistency proof from the tree at size1
// leaves to the tree at size2, for any 0 ≤ size1 ≤ size2 ≤ the current size:
// RFC 9162 §2.1.4.1 PROOF(size1, D[0:size2]). The proof between equal sizes
// and from the empty tree is empty (see ConsistencyProof.Verify).
func (t *Tree) ConsistencyProof(size1, size2 uint64) (ConsistencyProof, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if size2 > t.size() {
		return ConsistencyProof{}, fmt.Errorf("%w: tree size %d past the tree's %d", ErrOutOfRange, size2, t.size())
	}
	if size1 > size2 {
		return ConsistencyProof{}, fmt.Errorf("%w: first size %d past second size %d", ErrOutOfRange, size1, size2)
	}
	p := ConsistencyProof{TreeSize1: size1, TreeSize2: size2}
	if 0 < size1 && size1 < size2 {
		p.Path = t.subproof(make([]Hash, 0, bitsLen(size2)+1), size1, 0, size2, true)
	}
	return p, nil
}

// subproof appends SUBPROOF(m, D[lo:hi], b) to dst, m counted from lo.
func (t *Tree) subproof(dst []Hash, m, lo, hi uint64, b bool) []Hash {
	n := hi - lo
	if m == n {
		if b {
			return dst
		}
		return append(dst, t.mth(lo, hi))
	}
	k := split(n)
	if m <= k {
		return append(t.subproof(dst, m, lo, lo+k, b), t.mth(lo+k, hi))
	}
	return append(t.subproof(dst, m-k, lo+k, hi, false), t.mth(lo, lo+k))
}

func bitsLen(n uint64) int {
	l := 0
	for ; n != 0; n >>= 1 {
		l++
	}
	return l
}
