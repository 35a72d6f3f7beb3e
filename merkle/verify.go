package merkle

import "fmt"

// Verify checks that leaf, the leaf hash of entry p.LeafIndex, is in the
// tree of p.TreeSize leaves whose root is root, with the algorithm of RFC
// 9162 §2.1.3.2. It returns nil or an error matching ErrInvalidProof.
func (p InclusionProof) Verify(leaf, root Hash) error {
	if p.LeafIndex >= p.TreeSize {
		return fmt.Errorf("%w: leaf %d of a tree of %d", ErrInvalidProof, p.LeafIndex, p.TreeSize)
	}
	if len(p.Path) > MaxPathLen {
		return fmt.Errorf("%w: inclusion path of %d hashes, more than %d", ErrInvalidProof, len(p.Path), MaxPathLen)
	}
	fn, sn := p.LeafIndex, p.TreeSize-1
	r := leaf
	for _, h := range p.Path {
		if sn == 0 {
			return fmt.Errorf("%w: inclusion path longer than the tree is deep", ErrInvalidProof)
		}
		if fn&1 == 1 || fn == sn {
			r = NodeHash(h, r)
			for fn&1 == 0 && fn != 0 {
				fn, sn = fn>>1, sn>>1
			}
		} else {
			r = NodeHash(r, h)
		}
		fn, sn = fn>>1, sn>>1
	}
	if sn != 0 {
		return fmt.Errorf("%w: inclusion path shorter than the tree is deep", ErrInvalidProof)
	}
	if r != root {
		return fmt.Errorf("%w: inclusion path leads to root %s, not %s", ErrInvalidProof, r, root)
	}
	return nil
}

// Verify checks that the tree of p.TreeSize1 leaves with root root1 is a
// prefix of the tree of p.TreeSize2 leaves with root root2, with the
// algorithm of RFC 9162 §2.1.4.2. It returns nil or an error matching
// ErrInvalidProof.
//
// The RFC defines proofs only for 0 < TreeSize1 < TreeSize2. capmesh also
// accepts the two trivial cases, each only with an empty path: equal sizes
// with equal roots (a head is consistent with itself, and two heads of one
// size with different roots are a forked log), and TreeSize1 = 0 with root1
// the empty root (the empty tree is a prefix of every tree).
func (p ConsistencyProof) Verify(root1, root2 Hash) error {
	switch {
	case p.TreeSize1 > p.TreeSize2:
		return fmt.Errorf("%w: first size %d past second size %d", ErrInvalidProof, p.TreeSize1, p.TreeSize2)
	case p.TreeSize1 == 0 || p.TreeSize1 == p.TreeSize2:
		return p.verifyTrivial(root1, root2)
	case len(p.Path) == 0:
		return fmt.Errorf("%w: empty consistency path between sizes %d and %d", ErrInvalidProof, p.TreeSize1, p.TreeSize2)
	case len(p.Path) > MaxPathLen:
		return fmt.Errorf("%w: consistency path of %d hashes, more than %d", ErrInvalidProof, len(p.Path), MaxPathLen)
	}
	path := p.Path
	if p.TreeSize1&(p.TreeSize1-1) == 0 { // a power of two: the old root is a node of the new tree
		path = append([]Hash{root1}, path...)
	}
	fn, sn := p.TreeSize1-1, p.TreeSize2-1
	for fn&1 == 1 {
		fn, sn = fn>>1, sn>>1
	}
	fr, sr := path[0], path[0]
	for _, c := range path[1:] {
		if sn == 0 {
			return fmt.Errorf("%w: consistency path longer than the tree is deep", ErrInvalidProof)
		}
		if fn&1 == 1 || fn == sn {
			fr, sr = NodeHash(c, fr), NodeHash(c, sr)
			for fn&1 == 0 && fn != 0 {
				fn, sn = fn>>1, sn>>1
			}
		} else {
			sr = NodeHash(sr, c)
		}
		fn, sn = fn>>1, sn>>1
	}
	if sn != 0 {
		return fmt.Errorf("%w: consistency path shorter than the tree is deep", ErrInvalidProof)
	}
	if fr != root1 {
		return fmt.Errorf("%w: consistency path leads to first root %s, not %s", ErrInvalidProof, fr, root1)
	}
	if sr != root2 {
		return fmt.Errorf("%w: consistency path leads to second root %s, not %s", ErrInvalidProof, sr, root2)
	}
	return nil
}

func (p ConsistencyProof) verifyTrivial(root1, root2 Hash) error {
	if len(p.Path) != 0 {
		return fmt.Errorf("%w: consistency path of %d hashes where none is due (sizes %d and %d)", ErrInvalidProof, len(p.Path), p.TreeSize1, p.TreeSize2)
	}
	if p.TreeSize1 == 0 {
		if root1 != EmptyRoot() {
			return fmt.Errorf("%w: first root %s is not the empty tree's", ErrInvalidProof, root1)
		}
		if p.TreeSize2 == 0 && root2 != root1 {
			return fmt.Errorf("%w: second root %s is not the empty tree's", ErrInvalidProof, root2)
		}
		return nil
	}
	if root1 != root2 {
		return fmt.Errorf("%w: two roots for tree size %d: %s and %s", ErrInvalidProof, p.TreeSize1, root1, root2)
	}
	return nil
}
