package merkle

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// oracle knows the truth about one tree: its leaves and the root of every
// size, from the reference code, and the tree under test for the one
// genuine path of every claim. A proof is genuine iff it is exactly the
// path the tree generates for its claim (two paths verifying to one root
// would be a SHA-256 collision), so the oracle decides what Verify must
// say about any mutation: accept iff leaf, roots and path are the true ones
// for the sizes and index the mutated proof claims.
type oracle struct {
	tree   *Tree
	leaves []Hash
	roots  []Hash
}

func newOracle(t testing.TB, n int) *oracle {
	t.Helper()
	d := testLeaves(n)
	return &oracle{tree: treeOf(d), leaves: d, roots: refRoots(d)}
}

func (o *oracle) n() uint64 { return uint64(len(o.leaves)) }

// inclusionTruth reports whether (leaf, p, root) states a fact.
func (o *oracle) inclusionTruth(t testing.TB, leaf Hash, p InclusionProof, root Hash) bool {
	if p.LeafIndex >= p.TreeSize || p.TreeSize > o.n() {
		return false
	}
	if leaf != o.leaves[p.LeafIndex] || root != o.roots[p.TreeSize] {
		return false
	}
	g, err := o.tree.InclusionProof(p.LeafIndex, p.TreeSize)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Equal(g.Path, p.Path)
}

// consistencyTruth reports whether (p, root1, root2) states a fact.
func (o *oracle) consistencyTruth(t testing.TB, p ConsistencyProof, root1, root2 Hash) bool {
	if p.TreeSize1 == 0 {
		// The empty tree is a prefix of every tree, even one larger than
		// the oracle's: such a claim says nothing about root2, unless the
		// second tree is empty too.
		return root1 == o.roots[0] && len(p.Path) == 0 && (p.TreeSize2 != 0 || root2 == root1)
	}
	if p.TreeSize1 > p.TreeSize2 || p.TreeSize2 > o.n() {
		return false
	}
	if root1 != o.roots[p.TreeSize1] || root2 != o.roots[p.TreeSize2] {
		return false
	}
	g, err := o.tree.ConsistencyProof(p.TreeSize1, p.TreeSize2)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Equal(g.Path, p.Path)
}

// flip returns h with byte i inverted.
func flip(h Hash, i int) Hash { h[i] ^= 0xff; return h }

// flips returns the byte positions to corrupt in one hash: all 32 when
// every is set, else one at random.
func flips(rng *rand.Rand, every bool) []int {
	if every {
		out := make([]int, HashSize)
		for i := range out {
			out[i] = i
		}
		return out
	}
	return []int{rng.IntN(HashSize)}
}

// pathMutations returns corrupted copies of path: every element with a
// flipped byte, truncated at either end, extended at either end, with two
// neighbours swapped, and one element duplicated.
func pathMutations(rng *rand.Rand, path []Hash, every bool) [][]Hash {
	var out [][]Hash
	for i := range path {
		for _, b := range flips(rng, every) {
			m := slices.Clone(path)
			m[i] = flip(m[i], b)
			out = append(out, m)
		}
	}
	extra := LeafHash([]byte("extra"))
	out = append(out, append(slices.Clone(path), extra), append([]Hash{extra}, path...))
	if len(path) > 0 {
		out = append(out, path[1:], path[:len(path)-1], append(slices.Clone(path), path[len(path)-1]))
	}
	if len(path) > 1 {
		m := slices.Clone(path)
		m[0], m[1] = m[1], m[0]
		out = append(out, m)
	}
	return out
}

// sizeMutations are the wrong values a size or index is tried with.
func sizeMutations(v uint64) []uint64 {
	return []uint64{v - 1, v + 1, v ^ 1, v * 2, v / 2, 0, v + 1<<40, ^uint64(0)}
}

// checkInclusion verifies the genuine proof for (index, size) and every
// tampered variant of it, each against the oracle.
func (o *oracle) checkInclusion(t testing.TB, rng *rand.Rand, index, size uint64, every bool) {
	t.Helper()
	p, err := o.tree.InclusionProof(index, size)
	if err != nil {
		t.Fatal(err)
	}
	leaf, root := o.leaves[index], o.roots[size]
	if err := p.Verify(leaf, root); err != nil {
		t.Fatalf("genuine inclusion proof (%d, %d): %v", index, size, err)
	}
	try := func(what string, leaf Hash, q InclusionProof, root Hash) {
		t.Helper()
		err := q.Verify(leaf, root)
		want := o.inclusionTruth(t, leaf, q, root)
		if want != (err == nil) || err != nil && !errors.Is(err, ErrInvalidProof) {
			t.Fatalf("inclusion (%d, %d) %s: Verify = %v, a true claim: %v", index, size, what, err, want)
		}
	}
	for _, b := range flips(rng, every) {
		try("leaf byte flipped", flip(leaf, b), p, root)
		try("root byte flipped", leaf, p, flip(root, b))
	}
	for _, m := range pathMutations(rng, p.Path, every) {
		try("path corrupted", leaf, InclusionProof{index, size, m}, root)
	}
	for _, i := range sizeMutations(index) {
		// The leaf and root stay; if the claimed index has a leaf, the
		// attacker may also use that leaf's true hash.
		try("index changed", leaf, InclusionProof{i, size, p.Path}, root)
	}
	for _, s := range sizeMutations(size) {
		r := root
		if s <= o.n() {
			r = o.roots[s] // the genuine root of the claimed size
		}
		try("size changed", leaf, InclusionProof{index, s, p.Path}, r)
	}
}

// checkConsistency verifies the genuine proof for (size1, size2) and every
// tampered variant of it, each against the oracle.
func (o *oracle) checkConsistency(t testing.TB, rng *rand.Rand, size1, size2 uint64, every bool) {
	t.Helper()
	p, err := o.tree.ConsistencyProof(size1, size2)
	if err != nil {
		t.Fatal(err)
	}
	r1, r2 := o.roots[size1], o.roots[size2]
	if err := p.Verify(r1, r2); err != nil {
		t.Fatalf("genuine consistency proof (%d, %d): %v", size1, size2, err)
	}
	try := func(what string, q ConsistencyProof, r1, r2 Hash) {
		t.Helper()
		err := q.Verify(r1, r2)
		want := o.consistencyTruth(t, q, r1, r2)
		if want != (err == nil) || err != nil && !errors.Is(err, ErrInvalidProof) {
			t.Fatalf("consistency (%d, %d) %s: Verify = %v, a true claim: %v", size1, size2, what, err, want)
		}
	}
	for _, b := range flips(rng, every) {
		try("first root byte flipped", p, flip(r1, b), r2)
		try("second root byte flipped", p, r1, flip(r2, b))
	}
	for _, m := range pathMutations(rng, p.Path, every) {
		try("path corrupted", ConsistencyProof{size1, size2, m}, r1, r2)
	}
	root := func(s uint64, fallback Hash) Hash {
		if s <= o.n() {
			return o.roots[s]
		}
		return fallback
	}
	for _, s := range sizeMutations(size1) {
		try("first size changed", ConsistencyProof{s, size2, p.Path}, root(s, r1), r2)
	}
	for _, s := range sizeMutations(size2) {
		try("second size changed", ConsistencyProof{size1, s, p.Path}, r1, root(s, r2))
	}
}

// TestAllPairsSmall checks every tree size up to 64: each root against the
// reference MTH, and for every leaf and every pair of sizes the generated
// proof against the reference PATH and PROOF, its verification, and the
// failure of every tamper (every byte of every hash flipped up to 8
// leaves, one random byte per hash above).
func TestAllPairsSmall(t *testing.T) {
	const n = 64
	o := newOracle(t, n)
	rng := rand.New(rand.NewPCG(1, 2))
	for size := uint64(0); size <= n; size++ {
		if got, want := o.roots[size], refMTH(o.leaves[:size]); got != want {
			t.Fatalf("reference roots disagree at %d", size)
		}
		if got, _ := o.tree.RootAt(size); got != o.roots[size] {
			t.Fatalf("RootAt(%d) = %s, want %s", size, got, o.roots[size])
		}
		every := size <= 8
		for i := uint64(0); i < size; i++ {
			p, _ := o.tree.InclusionProof(i, size)
			if want := refPath(int(i), o.leaves[:size]); !slices.Equal(p.Path, want) {
				t.Fatalf("InclusionProof(%d, %d) = %v, want %v", i, size, p.Path, want)
			}
			o.checkInclusion(t, rng, i, size, every)
		}
		for size1 := uint64(0); size1 <= size; size1++ {
			p, _ := o.tree.ConsistencyProof(size1, size)
			var want []Hash
			if size1 > 0 {
				want = refProof(int(size1), o.leaves[:size])
			}
			if !slices.Equal(p.Path, want) {
				t.Fatalf("ConsistencyProof(%d, %d) = %v, want %v", size1, size, p.Path, want)
			}
			o.checkConsistency(t, rng, size1, size, every)
		}
	}
}

// TestRandomLarge is the randomized test over 100,000 leaves (10,000
// with -short; 1,000 pairs instead of 3,000 under -race): roots of sampled sizes against the reference, then a dense
// random sample of (index, size) and (size1, size2) pairs, each verified
// and each tampered every way checkInclusion and checkConsistency know.
func TestRandomLarge(t *testing.T) {
	n, pairs := 100_000, 3000
	if raceEnabled {
		pairs = 1000
	}
	if testing.Short() {
		n, pairs = 10_000, 300
	}
	o := newOracle(t, n)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, size := range []int{n, n - 1, 1 << 13, 1<<13 + 1, rng.IntN(n + 1)} {
		if got, want := o.roots[size], refMTH(o.leaves[:size]); got != want {
			t.Fatalf("reference roots disagree at %d", size)
		}
	}
	step := 1
	if raceEnabled {
		step = 7 // every size costs under -race; a the odd stride still meets every residue modulo every power of two
	}
	for size := 0; size <= n; size += step {
		if got, _ := o.tree.RootAt(uint64(size)); got != o.roots[size] {
			t.Fatalf("RootAt(%d) = %s, want %s", size, got, o.roots[size])
		}
	}
	for range pairs {
		size := 1 + rng.Uint64N(uint64(n))
		index := rng.Uint64N(size)
		o.checkInclusion(t, rng, index, size, false)
		size1 := rng.Uint64N(size + 1)
		o.checkConsistency(t, rng, size1, size, false)
	}
	// The reference PATH and PROOF are O(n) each: a few at full size.
	for range 5 {
		size := 1 + rng.IntN(n)
		i, m := rng.IntN(size), 1+rng.IntN(size)
		if p, _ := o.tree.InclusionProof(uint64(i), uint64(size)); !slices.Equal(p.Path, refPath(i, o.leaves[:size])) {
			t.Errorf("InclusionProof(%d, %d) differs from the reference", i, size)
		}
		if p, _ := o.tree.ConsistencyProof(uint64(m), uint64(size)); !slices.Equal(p.Path, refProof(m, o.leaves[:size])) {
			t.Errorf("ConsistencyProof(%d, %d) differs from the reference", m, size)
		}
	}
}

// TestOutOfRange pins the generator's refusals.
func TestOutOfRange(t *testing.T) {
	o := newOracle(t, 5)
	for _, c := range []struct {
		name string
		err  error
	}{
		{"RootAt(6)", func() error { _, err := o.tree.RootAt(6); return err }()},
		{"Leaf(5)", func() error { _, err := o.tree.Leaf(5); return err }()},
		{"InclusionProof(0, 6)", func() error { _, err := o.tree.InclusionProof(0, 6); return err }()},
		{"InclusionProof(3, 3)", func() error { _, err := o.tree.InclusionProof(3, 3); return err }()},
		{"InclusionProof(0, 0)", func() error { _, err := o.tree.InclusionProof(0, 0); return err }()},
		{"ConsistencyProof(3, 2)", func() error { _, err := o.tree.ConsistencyProof(3, 2); return err }()},
		{"ConsistencyProof(1, 6)", func() error { _, err := o.tree.ConsistencyProof(1, 6); return err }()},
	} {
		if !errors.Is(c.err, ErrOutOfRange) {
			t.Errorf("%s: err = %v, want ErrOutOfRange", c.name, c.err)
		}
	}
	if h, err := o.tree.Leaf(4); err != nil || h != o.leaves[4] {
		t.Errorf("Leaf(4) = %s, %v", h, err)
	}
	if var0 := (&Tree{}).Root(); var0 != EmptyRoot() {
		t.Errorf("zero Tree's root = %s, want the empty root", var0)
	}
}
