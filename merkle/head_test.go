package merkle

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/identity"
)

func testKey(t testing.TB, seed byte) *identity.PrivateKey {
	t.Helper()
	k, err := identity.NewKeyFromSeed(bytes.Repeat([]byte{seed}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var testTime = time.Date(2026, 11, 27, 3, 0, 0, 123_000_000, time.UTC)

// TestSignedBytes pins the signed layout of a tree head byte for byte:
// the domain "capmesh-sth-v1\n", tree_size and timestamp (ms) as big-endian
// uint64, the root hash.
func TestSignedBytes(t *testing.T) {
	h := SignedTreeHead{TreeSize: 0x0102030405060708, Timestamp: 0x1112131415161718, RootHash: LeafHash(nil)}
	want := "6361706d6573682d7374682d76310a" + "0102030405060708" + "1112131415161718" + LeafHash(nil).String()
	if got := hex.EncodeToString(h.SignedBytes()); got != want {
		t.Errorf("SignedBytes = %s\nwant          %s", got, want)
	}
	if len(h.SignedBytes()) != 63 {
		t.Errorf("SignedBytes is %d bytes, want 63", len(h.SignedBytes()))
	}
}

// TestSignTreeHead signs a head and checks every tamper of it fails:
// each byte of the signature, root, size and timestamp, the key_id, and a
// different key.
func TestSignTreeHead(t *testing.T) {
	key := testKey(t, 1)
	tree := treeOf(testLeaves(10))
	h, err := tree.SignHead(key, 7, testTime)
	if err != nil {
		t.Fatal(err)
	}
	root7, _ := tree.RootAt(7)
	if h.TreeSize != 7 || h.RootHash != root7 || h.KeyID != key.Public().KeyID() || !h.Time().Equal(testTime) {
		t.Fatalf("head = %+v", h)
	}
	if err := h.Verify(key.Public()); err != nil {
		t.Fatalf("genuine head: %v", err)
	}
	for i := range h.Signature {
		m := h
		m.Signature = bytes.Clone(h.Signature)
		m.Signature[i] ^= 0x01
		if err := m.Verify(key.Public()); !errors.Is(err, ErrInvalidHead) || !errors.Is(err, identity.ErrInvalidSignature) {
			t.Errorf("signature byte %d flipped: err = %v", i, err)
		}
	}
	for i := range HashSize {
		m := h
		m.RootHash = flip(h.RootHash, i)
		if err := m.Verify(key.Public()); !errors.Is(err, ErrInvalidHead) {
			t.Errorf("root byte %d flipped: err = %v", i, err)
		}
	}
	for bit := range 64 {
		m, n := h, h
		m.TreeSize ^= 1 << bit
		n.Timestamp ^= 1 << bit
		if err := m.Verify(key.Public()); !errors.Is(err, ErrInvalidHead) {
			t.Errorf("tree_size bit %d flipped: err = %v", bit, err)
		}
		if err := n.Verify(key.Public()); !errors.Is(err, ErrInvalidHead) {
			t.Errorf("timestamp bit %d flipped: err = %v", bit, err)
		}
	}
	for _, m := range []SignedTreeHead{
		func() SignedTreeHead { m := h; m.KeyID = strings.ToUpper(h.KeyID); return m }(),
		func() SignedTreeHead { m := h; m.KeyID = ""; return m }(),
		func() SignedTreeHead { m := h; m.Signature = h.Signature[:63]; return m }(),
		func() SignedTreeHead { m := h; m.Signature = nil; return m }(),
	} {
		if err := m.Verify(key.Public()); !errors.Is(err, ErrInvalidHead) {
			t.Errorf("%+v: err = %v", m, err)
		}
	}
	if err := h.Verify(testKey(t, 2).Public()); !errors.Is(err, ErrInvalidHead) {
		t.Errorf("another key: err = %v", err)
	}
	// The same head re-labelled with the other key's id still fails: the
	// signature is the first key's.
	other := testKey(t, 2).Public()
	m := h
	m.KeyID = other.KeyID()
	if err := m.Verify(other); !errors.Is(err, identity.ErrInvalidSignature) {
		t.Errorf("relabelled head: err = %v", err)
	}
	if _, err := tree.SignHead(key, 11, testTime); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("SignHead past the size: err = %v", err)
	}
	if _, err := SignTreeHead(key, 0, EmptyRoot(), time.UnixMilli(-1)); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("timestamp before the epoch: err = %v", err)
	}
}

// TestSignedHeadsAllPairs signs a head for every size of a 32-leaf tree
// and checks the offline verifications `capmesh evidence prove` and
// `capmesh evidence consistency` make: every leaf in every head, every
// ordered pair of heads consistent, and every mismatched combination
// refused.
func TestSignedHeadsAllPairs(t *testing.T) {
	const n = 32
	key, other := testKey(t, 1), testKey(t, 2)
	o := newOracle(t, n)
	heads := make([]SignedTreeHead, n+1)
	for s := range heads {
		var err error
		if heads[s], err = o.tree.SignHead(key, uint64(s), testTime.Add(time.Duration(s)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	for s, head := range heads {
		for i := range uint64(s) {
			p, _ := o.tree.InclusionProof(i, uint64(s))
			if err := VerifyInclusion(key.Public(), head, o.leaves[i], p); err != nil {
				t.Fatalf("leaf %d in head %d: %v", i, s, err)
			}
			if err := VerifyInclusion(other.Public(), head, o.leaves[i], p); !errors.Is(err, ErrInvalidHead) {
				t.Fatalf("leaf %d in head %d under another key: err = %v", i, s, err)
			}
			for _, s2 := range []int{s - 1, s + 1} {
				if s2 > int(i) && s2 <= n {
					if err := VerifyInclusion(key.Public(), heads[s2], o.leaves[i], p); !errors.Is(err, ErrInvalidProof) {
						t.Fatalf("proof for size %d against head %d: err = %v", s, s2, err)
					}
				}
			}
		}
		for s1 := range s + 1 {
			p, _ := o.tree.ConsistencyProof(uint64(s1), uint64(s))
			if err := VerifyConsistency(key.Public(), heads[s1], head, p); err != nil {
				t.Fatalf("heads %d → %d: %v", s1, s, err)
			}
			if s1 < s {
				if err := VerifyConsistency(key.Public(), head, heads[s1], p); !errors.Is(err, ErrInvalidProof) {
					t.Fatalf("heads %d → %d swapped: err = %v", s1, s, err)
				}
			}
		}
	}
	// A forked log: a second head for size 5 over a different tree.
	fork := treeOf(append(testLeaves(4), LeafHash([]byte("fork"))))
	forked, _ := fork.SignHead(key, 5, testTime)
	if err := VerifyConsistency(key.Public(), heads[5], forked, ConsistencyProof{TreeSize1: 5, TreeSize2: 5}); !errors.Is(err, ErrInvalidProof) {
		t.Errorf("two roots for one size: err = %v", err)
	}
	p, _ := fork.ConsistencyProof(3, 5)
	if err := VerifyConsistency(key.Public(), heads[3], forked, p); err != nil {
		t.Errorf("the fork is consistent with the common prefix: %v", err)
	}
	p, _ = o.tree.ConsistencyProof(5, 8)
	if err := VerifyConsistency(key.Public(), forked, heads[8], p); !errors.Is(err, ErrInvalidProof) {
		t.Errorf("forked head → genuine head: err = %v", err)
	}
	// A head signed by another key on either side.
	alien, _ := o.tree.SignHead(other, 8, testTime)
	if err := VerifyConsistency(key.Public(), heads[5], alien, p); !errors.Is(err, ErrInvalidHead) {
		t.Errorf("newer head by another key: err = %v", err)
	}
	if err := VerifyConsistency(key.Public(), alien, heads[8], ConsistencyProof{TreeSize1: 8, TreeSize2: 8}); !errors.Is(err, ErrInvalidHead) {
		t.Errorf("older head by another key: err = %v", err)
	}
}

// TestSizeBoundByHead shows why proofs are checked against signed heads: a
// root alone does not name its tree size, so the path for leaf 0 of a
// 3-leaf tree, relabelled as a proof for a 4-leaf tree, still leads to the
// 3-leaf root. VerifyInclusion refuses it against either head, because the
// head signs the size with the root.
func TestSizeBoundByHead(t *testing.T) {
	key := testKey(t, 1)
	o := newOracle(t, 4)
	p, _ := o.tree.InclusionProof(0, 3)
	relabelled := InclusionProof{LeafIndex: 0, TreeSize: 4, Path: p.Path}
	if err := relabelled.Verify(o.leaves[0], o.roots[3]); err != nil {
		t.Fatalf("the RFC verifier binds the size after all (update docs/merkle.md): %v", err)
	}
	for _, size := range []uint64{3, 4} {
		head, _ := o.tree.SignHead(key, size, testTime)
		if err := VerifyInclusion(key.Public(), head, o.leaves[0], relabelled); !errors.Is(err, ErrInvalidProof) {
			t.Errorf("relabelled proof against head %d: err = %v", size, err)
		}
	}
}

// TestTimestampsNotCompared: consistency is about trees; an older tree
// signed later than a newer one is still its prefix.
func TestTimestampsNotCompared(t *testing.T) {
	key := testKey(t, 1)
	o := newOracle(t, 9)
	older, _ := o.tree.SignHead(key, 5, testTime.Add(time.Hour))
	newer, _ := o.tree.SignHead(key, 9, testTime)
	p, _ := o.tree.ConsistencyProof(5, 9)
	if err := VerifyConsistency(key.Public(), older, newer, p); err != nil {
		t.Errorf("err = %v", err)
	}
}
