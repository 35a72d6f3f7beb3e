package merkle

import (
	"crypto/sha256"
	"slices"
	"testing"
)

// The RFC 6962 test tree: the eight leaf inputs and the roots of every
// prefix that the Certificate Transparency implementations test against,
// written here from the published values, not imported.
var (
	rfcLeaves = []string{
		"",
		"\x00",
		"\x10",
		"\x20\x21",
		"\x30\x31",
		"\x40\x41\x42\x43",
		"\x50\x51\x52\x53\x54\x55\x56\x57",
		"\x60\x61\x62\x63\x64\x65\x66\x67\x68\x69\x6a\x6b\x6c\x6d\x6e\x6f",
	}
	rfcRoots = []string{
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", // 0: SHA-256("")
		"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
		"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
		"aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
		"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
		"4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
		"76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
		"ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
		"5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
	}
	// Published proofs over the same tree.
	rfcInclusion = []struct {
		index, size uint64
		path        []string
	}{
		{0, 1, nil},
		{0, 8, []string{
			"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
			"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
			"6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
		}},
		{5, 8, []string{
			"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
			"ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
			"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
		}},
		{2, 3, []string{
			"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
		}},
		{1, 5, []string{
			"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
			"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
			"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
		}},
	}
	rfcConsistency = []struct {
		size1, size2 uint64
		path         []string
	}{
		{1, 1, nil},
		{1, 8, []string{
			"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
			"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
			"6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
		}},
		{6, 8, []string{
			"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
			"ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
			"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
		}},
		{2, 5, []string{
			"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
			"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
		}},
	}
)

func rfcTree(t *testing.T) (*Tree, []Hash) {
	t.Helper()
	d := make([]Hash, len(rfcLeaves))
	for i, s := range rfcLeaves {
		d[i] = LeafHash([]byte(s))
	}
	return treeOf(d), d
}

func mustHashes(t *testing.T, ss []string) []Hash {
	t.Helper()
	hs := make([]Hash, len(ss))
	for i, s := range ss {
		h, err := ParseHash(s)
		if err != nil {
			t.Fatal(err)
		}
		hs[i] = h
	}
	return hs
}

// TestHashing pins RFC 9162 §2.1.1's three hash definitions byte for byte.
func TestHashing(t *testing.T) {
	if got, want := EmptyRoot().String(), rfcRoots[0]; got != want {
		t.Errorf("EmptyRoot = %s, want SHA-256(\"\") %s", got, want)
	}
	data := []byte("event")
	if got, want := LeafHash(data), Hash(sha256.Sum256(append([]byte{0}, data...))); got != want {
		t.Errorf("LeafHash = %s, want SHA-256(0x00 ‖ data) %s", got, want)
	}
	l, r := LeafHash([]byte("l")), LeafHash([]byte("r"))
	want := Hash(sha256.Sum256(slices.Concat([]byte{1}, l[:], r[:])))
	if got := NodeHash(l, r); got != want {
		t.Errorf("NodeHash = %s, want SHA-256(0x01 ‖ l ‖ r) %s", got, want)
	}
}

// TestRFC6962Vectors checks the tree against the published RFC 6962 test
// vectors: every root, and the published inclusion and consistency proofs,
// generated and verified.
func TestRFC6962Vectors(t *testing.T) {
	tree, d := rfcTree(t)
	for size, want := range rfcRoots {
		got, err := tree.RootAt(uint64(size))
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != want {
			t.Errorf("RootAt(%d) = %s, want %s", size, got, want)
		}
		if ref := refMTH(d[:size]); ref.String() != want {
			t.Errorf("reference MTH(D[0:%d]) = %s, want %s", size, ref, want)
		}
	}
	roots := mustHashes(t, rfcRoots)
	for _, c := range rfcInclusion {
		p, err := tree.InclusionProof(c.index, c.size)
		if err != nil {
			t.Fatal(err)
		}
		if want := mustHashes(t, c.path); !slices.Equal(p.Path, want) {
			t.Errorf("InclusionProof(%d, %d) = %v, want %v", c.index, c.size, p.Path, want)
		}
		if err := p.Verify(d[c.index], roots[c.size]); err != nil {
			t.Errorf("InclusionProof(%d, %d): %v", c.index, c.size, err)
		}
	}
	for _, c := range rfcConsistency {
		p, err := tree.ConsistencyProof(c.size1, c.size2)
		if err != nil {
			t.Fatal(err)
		}
		if want := mustHashes(t, c.path); !slices.Equal(p.Path, want) {
			t.Errorf("ConsistencyProof(%d, %d) = %v, want %v", c.size1, c.size2, p.Path, want)
		}
		if err := p.Verify(roots[c.size1], roots[c.size2]); err != nil {
			t.Errorf("ConsistencyProof(%d, %d): %v", c.size1, c.size2, err)
		}
	}
}

// TestTamperedLeafData flips every byte of every event of the RFC 6962
// tree, and truncates and extends each event: the inclusion proof of the
// genuine event must then fail for every head that contains it.
func TestTamperedLeafData(t *testing.T) {
	tree, _ := rfcTree(t)
	roots := mustHashes(t, rfcRoots)
	for i, s := range rfcLeaves {
		var variants [][]byte
		for b := range len(s) {
			v := []byte(s)
			v[b] ^= 0xff
			variants = append(variants, v)
		}
		variants = append(variants, append([]byte(s), 0))
		if len(s) > 0 {
			variants = append(variants, []byte(s[:len(s)-1]))
		}
		for size := uint64(i + 1); size <= 8; size++ {
			p, _ := tree.InclusionProof(uint64(i), size)
			if err := p.Verify(LeafHash([]byte(s)), roots[size]); err != nil {
				t.Fatalf("genuine leaf %d in %d: %v", i, size, err)
			}
			for _, v := range variants {
				if err := p.Verify(LeafHash(v), roots[size]); err == nil {
					t.Errorf("leaf %d tampered to %x verifies in tree %d", i, v, size)
				}
			}
		}
	}
}
