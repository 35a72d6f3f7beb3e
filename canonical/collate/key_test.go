package collate

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

func keyCompare(a, b string) int {
	return sign(bytes.Compare(AppendKey(nil, a), AppendKey(nil, b)))
}

// TestKeyMatchesNode: comparing sort keys as bytes gives Node's answer for
// every pair of the fidelity corpus, in both directions, with the key cache
// cold and then warm.
func TestKeyMatchesNode(t *testing.T) {
	as, bs, want := readPairs(t)
	for pass := range 2 {
		if pass == 0 {
			keyCache.mu.Lock()
			clear(keyCache.m)
			keyCache.bytes = 0
			keyCache.mu.Unlock()
		}
		bad := 0
		for i := range want {
			if got, back := keyCompare(as[i], bs[i]), keyCompare(bs[i], as[i]); got != want[i] || back != -want[i] {
				bad++
				if bad <= 10 {
					t.Errorf("pass %d: key order of %+q vs %+q = %d (reverse %d), node says %d", pass, as[i], bs[i], got, back, want[i])
				}
			}
		}
		if bad > 0 {
			t.Fatalf("pass %d: %d of %d key comparisons differ from node", pass, bad, len(want))
		}
	}
}

// TestKeyASCIIMatchesCompare: the table-built keys of ASCII strings agree
// with Compare on every pair of 0-, 1- and 2-byte ASCII strings, and with
// the keys the general path builds.
func TestKeyASCIIMatchesCompare(t *testing.T) {
	c := root()
	strs := []string{""}
	for a := range 128 {
		strs = append(strs, string(rune(a)))
	}
	for _, a := range []byte("\x00\x01\t aA_-0z~") {
		for b := range 128 {
			strs = append(strs, string([]byte{a, byte(b)}))
		}
	}
	var runes []rune
	for _, a := range strs {
		ces, _ := c.appendCEs(nil, nil, &runes, a)
		if got, want := AppendKey(nil, a), appendCEKey(nil, ces); !bytes.Equal(got, want) {
			t.Fatalf("AppendKey(%q) = %x, general path %x", a, got, want)
		}
	}
	for _, a := range strs {
		for _, b := range strs {
			if k, c := keyCompare(a, b), Compare(a, b); k != c {
				t.Fatalf("key order of %q vs %q = %d, Compare = %d", a, b, k, c)
			}
		}
	}
}

// TestKeyCacheBounded: the cache never holds more than its byte budget and
// keys stay right across a reset.
func TestKeyCacheBounded(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		s := fmt.Sprintf("é%d%s", i, strings.Repeat("ß", r.IntN(40)))
		AppendKey(nil, s)
		keyCache.mu.RLock()
		n := keyCache.bytes
		keyCache.mu.RUnlock()
		if n > maxCacheBytes {
			t.Fatalf("cache holds %d bytes, budget %d", n, maxCacheBytes)
		}
	}
	long := strings.Repeat("é", maxCachedLen)
	AppendKey(nil, long)
	if _, ok := keyCache.get(long); ok {
		t.Error("a string longer than maxCachedLen was cached")
	}
	if got := keyCompare("é", "f"); got != -1 {
		t.Errorf("é vs f after cache churn = %d", got)
	}
}

// sortSets are string sets that exercise the Sorter's paths: simple ASCII
// (insertion and key sort), ties that must keep input order, ignorables,
// non-ASCII and duplicates.
func sortSets(r *rand.Rand) [][]string {
	sets := [][]string{
		{"b", "a"},
		{"policyBindings", "policies", "schema", "name", "kind", "instructions", "description"},
		{"f", "é", "e\u0301", "é", "e", "E", "a\u0001", "a", "a\u200d", "A"},
		{"e\u0301", "f", "é"},
		{"z", "ö", "aa", "b", "y", "j", "i", "ß", "st", "😀", "_x", "x", "-", "_", "0", "~", "\ufffd", "日本", "한국"},
		{"tool_19", "tool_02", "tool_10", "tool_1", "Tool_1", "tool_01", "tool_1", "tool_0", "tool_11", "tool_12", "tool_13", "tool_14", "tool_15", "a", "A", "b"},
		{"a\tb", "a b", "a\nb", "a\rb", "a-b", "a_b", "a.b", "ab", "AB", "aB", "Ab", "a", "b", "c", "d", "\t", " "},
	}
	pool := []string{"a", "A", "b", "é", "e\u0301", "E\u0301", "\u0001", "\u200d", "ß", "s", "_", "-", " ", "0", "\u0660", "😀", "ı", "İ", "i", "ǅ", "\xed\xa0\x80", "\u0e40\u0e01", "\u0f71\u0f72"}
	ascii := []string{"a", "A", "b", "B", "_", "-", " ", "0", "9", "z", "\t", "~"}
	for range 300 {
		n := 2 + r.IntN(30)
		var mixed, simple []string
		for range n {
			var m, s strings.Builder
			for range 1 + r.IntN(4) {
				m.WriteString(pool[r.IntN(len(pool))])
				s.WriteString(ascii[r.IntN(len(ascii))])
			}
			mixed = append(mixed, m.String())
			simple = append(simple, s.String())
		}
		sets = append(sets, mixed, simple)
	}
	return sets
}

// TestSorterMatchesStableCompare: Sorter.Sort and Strings give exactly the
// order of a stable sort with Compare, ties in input order.
func TestSorterMatchesStableCompare(t *testing.T) {
	var s Sorter
	for _, set := range sortSets(rand.New(rand.NewPCG(3, 4))) {
		want := slices.Clone(set)
		slices.SortStableFunc(want, Compare)
		perm := make([]int32, len(set))
		for i := range perm {
			perm[i] = int32(i)
		}
		ties := s.Sort(perm, set)
		wantTies := false
		for i := range set {
			for j := i + 1; j < len(set); j++ {
				wantTies = wantTies || Compare(set[i], set[j]) == 0
			}
		}
		if ties != wantTies {
			t.Fatalf("Sorter.Sort(%+q) ties = %v, want %v", set, ties, wantTies)
		}
		got := make([]string, len(set))
		for i, x := range perm {
			got[i] = set[x]
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Sorter.Sort(%+q) (-want +got):\n%s", set, diff)
		}
		// Ties keep input order: equal strings appear in ascending element
		// number.
		for i := 1; i < len(perm); i++ {
			if Compare(set[perm[i-1]], set[perm[i]]) == 0 && perm[i-1] > perm[i] {
				t.Fatalf("tie %+q / %+q out of input order", set[perm[i-1]], set[perm[i]])
			}
		}
		got = slices.Clone(set)
		Strings(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Strings(%+q) (-want +got):\n%s", set, diff)
		}
	}
}

func BenchmarkKeyASCII(b *testing.B) {
	keys := []string{"description", "inputSchema", "instructions", "kind", "name", "policies", "policyBindings", "schema", "additionalProperties", "required"}
	var buf []byte
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf = AppendKey(buf[:0], keys[i%len(keys)])
	}
}

// BenchmarkKeyNonASCII measures a non-ASCII key from the cache (warm) and
// computed from the collation data (cold).
func BenchmarkKeyNonASCII(b *testing.B) {
	keys := []string{"café", "cafe\u0301", "naïve", "Ωmega", "日本語", "😀 emoji", "straße", "strasse"}
	var buf []byte
	b.Run("warm", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			buf = AppendKey(buf[:0], keys[i%len(keys)])
		}
	})
	c := root()
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			buf = c.appendKeyUncached(buf[:0], keys[i%len(keys)])
		}
	})
}

// BenchmarkSort sorts the 7 keys of a tool payload (simple ASCII) and a
// 7-key object with non-ASCII keys, against slices.SortStableFunc with
// Compare.
func BenchmarkSort(b *testing.B) {
	sets := map[string][]string{
		"ascii7":    {"policyBindings", "schema", "policies", "name", "kind", "instructions", "description"},
		"nonascii7": {"subjectId", "traceId", "région", "Zoë", "_internal", "budget", "labels"},
	}
	for name, set := range sets {
		b.Run(name+"/sorter", func(b *testing.B) {
			var s Sorter
			perm := make([]int32, len(set))
			b.ReportAllocs()
			for b.Loop() {
				for i := range perm {
					perm[i] = int32(i)
				}
				s.Sort(perm, set)
			}
		})
		b.Run(name+"/compare", func(b *testing.B) {
			work := make([]string, len(set))
			b.ReportAllocs()
			for b.Loop() {
				copy(work, set)
				slices.SortStableFunc(work, Compare)
			}
		})
	}
}

// TestPrefixDecidesLikeCompare: whenever two exact prefixes differ, they
// order their strings as Compare does — over every pair of short strings
// built from simple characters, the empty string, ignorables and
// non-ASCII, and over the fidelity corpus.
func TestPrefixDecidesLikeCompare(t *testing.T) {
	atoms := []string{"", "a", "A", "b", "W", "w", "_", "-", " ", "\t", "\r", "0", "9", "~", "\x7f", "\x00", "\u0001", "é", "e\u0301", "ab", "aB"}
	var strs []string
	for _, x := range atoms {
		for _, y := range atoms {
			strs = append(strs, x+y, x+y+"0123456", x+"012345678"+y)
		}
	}
	as, bs, _ := readPairs(t)
	check := func(a, b string) {
		if r, ok := QuickCompare(a, b); ok && r != Compare(a, b) {
			t.Fatalf("QuickCompare(%+q, %+q) = %d, Compare = %d", a, b, r, Compare(a, b))
		}
		pa, oka := prefix(a)
		pb, okb := prefix(b)
		if !oka || !okb || pa == pb {
			return
		}
		want := Compare(a, b)
		if got := cmpU64(pa, pb); got != want {
			t.Fatalf("prefix order of %+q vs %+q = %d, Compare = %d", a, b, got, want)
		}
	}
	for _, a := range strs {
		for _, b := range strs {
			check(a, b)
		}
	}
	for i := range as {
		check(as[i], bs[i])
	}
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// FuzzKey: for any two byte strings (invalid UTF-8 and WTF-8 included),
// sort keys order them as Compare does, and QuickCompare, when it decides,
// agrees.
func FuzzKey(f *testing.F) {
	for _, p := range [][2]string{{"a", "A"}, {"é", "e\u0301"}, {"région", "ratio"}, {"a\u0001", "a"}, {"\xff", "\ufffd"}, {"\xed\xa0\x80", "\U0010ffff"}, {"tool_10", "tool_1"}, {"\u0e40\u0e01", "\u0e01"}} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		want := Compare(a, b)
		if got := keyCompare(a, b); got != want {
			t.Fatalf("key order of %+q vs %+q = %d, Compare = %d", a, b, got, want)
		}
		if r, ok := QuickCompare(a, b); ok && r != want {
			t.Fatalf("QuickCompare(%+q, %+q) = %d, Compare = %d", a, b, r, want)
		}
	})
}

// TestKeyConcurrent: AppendKey and Sorters used from many goroutines at
// once (run with -race) give the same keys as one goroutine.
func TestKeyConcurrent(t *testing.T) {
	strs := []string{"é", "naïve", "日本語", "a", "région", "Zoë", "ß", "😀"}
	want := make([][]byte, len(strs))
	for i, s := range strs {
		want[i] = AppendKey(nil, s)
	}
	done := make(chan error)
	for g := range 8 {
		go func() {
			var s Sorter
			for n := range 500 {
				i := (g + n) % len(strs)
				if got := AppendKey(nil, strs[i]+fmt.Sprint(n%3)); len(got) == 0 {
					done <- fmt.Errorf("empty key")
					return
				}
				if got := AppendKey(nil, strs[i]); !bytes.Equal(got, want[i]) {
					done <- fmt.Errorf("key of %q changed under concurrency", strs[i])
					return
				}
				perm := []int32{0, 1, 2, 3, 4, 5, 6, 7}
				s.Sort(perm, strs)
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestPrefixMatchesBytewise: the unrolled prefix equals the byte-by-byte
// definition (ranks of the first eight bytes, big-endian, 0-padded; exact
// when every one of them is simple) for strings of every length up to 12
// over every byte value at every position.
func TestPrefixMatchesBytewise(t *testing.T) {
	ref := func(s string) (uint64, bool) {
		var p uint64
		ok := true
		for i := range 8 {
			var r uint8
			if i < len(s) {
				r = simplePrim[s[i]]
				ok = ok && r != 0
			}
			p = p<<8 | uint64(r)
		}
		return p, ok
	}
	base := []byte("aZ_9 ~b\tQr-x")
	for n := 0; n <= len(base); n++ {
		for pos := 0; pos < max(n, 1); pos++ {
			for c := range 256 {
				b := append([]byte(nil), base[:n]...)
				if n > 0 {
					b[pos] = byte(c)
				}
				s := string(b)
				gp, gok := prefix(s)
				wp, wok := ref(s)
				if gok != wok || (gok && gp != wp) {
					t.Fatalf("prefix(%q) = %016x, %v; want %016x, %v", s, gp, gok, wp, wok)
				}
			}
		}
	}
}
