package collate

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The pairs of HASHING.md §2.3 where ICU order and code-unit order disagree,
// as Node answers them.
func TestHashingSpecPairs(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"B", "a", 1},
		{"a", "A", -1},
		{"Z", "a", 1},
		{"_", "A", -1},
		{"-", "_", 1},
		{"0", "_", 1},
		{"~", "a", -1},
		{"ab", "aB", -1},
		{"é", "f", -1},
		{"ß", "st", -1},
		{"😀", "a", -1},
		{"e\u0301", "é", 0},
		{"a\u0001", "a", 0},
		{"a\u200d", "a", 0},
		{"_x", "x", -1},
		{"a10", "a2", -1},
		{"10", "9", -1},
		{"Å", "\u212b", 0},
		{"0", "\u0660", 0},
		{"0", "\u06f0", 0},
		{"0", "\u0966", 0},
		{"0", "\u3007", 0},
		{"\ufffd", "z", 1},
		{"", "\u200d", 0},
		{"", "a", -1},
		{"a\u0301\u0323", "a\u0323\u0301", 0},
		{"\xed\xa0\x80", "a", 1},           // lone lead surrogate: implicit weight, after letters
		{"\xed\xa0\x80", "\U0010ffff", -1}, // ... in code point order among implicits
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%+q_%+q", tt.a, tt.b), func(t *testing.T) {
			if got := Compare(tt.a, tt.b); got != tt.want {
				t.Errorf("Compare(%+q, %+q) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
			if got := Compare(tt.b, tt.a); got != -tt.want {
				t.Errorf("Compare(%+q, %+q) = %d, want %d", tt.b, tt.a, got, -tt.want)
			}
		})
	}
}

func TestPrintableASCIIOrder(t *testing.T) {
	// HASHING.md §2.3: all printable ASCII in ICU order (first is space).
	const want = " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789aAbBcCdDeEfFgGhHiIjJkKlLmMnNoOpPqQrRsStTuUvVwWxXyYzZ"
	var chars []string
	for c := byte(0x20); c < 0x7f; c++ {
		chars = append(chars, string(c))
	}
	slices.SortStableFunc(chars, Compare)
	if diff := cmp.Diff(want, strings.Join(chars, "")); diff != "" {
		t.Errorf("ASCII order (-want +got):\n%s", diff)
	}
	multi := []string{"a", "A", "ab", "aB", "Ab", "AB", "ac", "b"}
	if !slices.IsSortedFunc(multi, Compare) {
		t.Errorf("%q is not sorted", multi)
	}
}

// TestStableTies: keys that compare equal keep input order under a stable
// sort, so both input orders give different but deterministic outputs.
func TestStableTies(t *testing.T) {
	in := []string{"f", "é", "e\u0301"}
	got := slices.Clone(in)
	slices.SortStableFunc(got, Compare)
	if diff := cmp.Diff([]string{"é", "e\u0301", "f"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	in = []string{"f", "e\u0301", "é"}
	got = slices.Clone(in)
	slices.SortStableFunc(got, Compare)
	if diff := cmp.Diff([]string{"e\u0301", "é", "f"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestASCIIFastPathMatchesSlowPath: the table-driven ASCII path and the
// general path agree on every pair of 0-, 1- and 2-byte ASCII strings.
func TestASCIIFastPathMatchesSlowPath(t *testing.T) {
	c := root()
	if !c.asciiOK {
		t.Fatal("ASCII fast path disabled: an ASCII character has a context or an expansion")
	}
	var strs []string
	strs = append(strs, "")
	for a := range 128 {
		strs = append(strs, string(rune(a)))
	}
	for _, a := range []byte("\x00\x01\t aA_-0z~") {
		for b := range 128 {
			strs = append(strs, string([]byte{a, byte(b)}))
		}
	}
	for _, a := range strs {
		for _, b := range strs {
			if f, s := c.compareASCII(a, b), c.compareSlow(a, b); f != s {
				t.Fatalf("compareASCII(%q, %q) = %d, compareSlow = %d", a, b, f, s)
			}
			if f, ok := compareSimple(a, b); ok && f != c.compareSlow(a, b) {
				t.Fatalf("compareSimple(%q, %q) = %d, compareSlow = %d", a, b, f, c.compareSlow(a, b))
			}
		}
	}
}

func TestDecodeWTF8(t *testing.T) {
	tests := []struct {
		in   string
		want []rune
	}{
		{"a\xed\xa0\x80b", []rune{'a', 0xd800, 'b'}},
		{"\xed\xa0\xbd\xed\xb8\x80", []rune{0x1f600}}, // encoded pair joins
		{"\xed\xb8\x80\xed\xa0\xbd", []rune{0xde00, 0xd83d}},
		{"\xff", []rune{0xfffd}},
		{"😀", []rune{0x1f600}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, decodeWTF8(nil, tt.in)); diff != "" {
			t.Errorf("decodeWTF8(%+q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestEmbeddedDataParses(t *testing.T) {
	d, err := loadICUData()
	if err != nil {
		t.Fatal(err)
	}
	if got := ceFromSimpleCE32(d.trie.get('a')); got>>32 == 0 {
		t.Errorf("'a' has no primary weight: %x", got)
	}
	if _, err := parseICUData(nil); err == nil {
		t.Error("parseICUData(nil) succeeded")
	}
	if _, err := parseNorm([]byte("NFD1\xff\xff\xff\xff")); err == nil {
		t.Error("parseNorm accepted truncated data")
	}
}

func FuzzCompare(f *testing.F) {
	for _, s := range []string{"", "a", "A", "é", "e\u0301", "\u0e40\u0e01", "\u0f71\u0f72", "가", "😀\u200d🔥", "\xed\xa0\x80", "\xff\xfe", "a\u0323\u0301"} {
		f.Add(s, "a")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		x, y := Compare(a, b), Compare(b, a)
		if x != -y {
			t.Fatalf("Compare(%+q, %+q) = %d but reverse = %d", a, b, x, y)
		}
		if x < -1 || x > 1 {
			t.Fatalf("Compare returned %d", x)
		}
		if Compare(a, a) != 0 {
			t.Fatalf("Compare(%+q, itself) != 0", a)
		}
	})
}

var benchSink int

func BenchmarkCompareASCIIKeys(b *testing.B) {
	keys := []string{"description", "inputSchema", "instructions", "kind", "name", "policies", "policyBindings", "schema", "additionalProperties", "required"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		benchSink += Compare(keys[i%len(keys)], keys[(i+3)%len(keys)])
	}
}

func BenchmarkCompareNonASCII(b *testing.B) {
	keys := []string{"café", "cafe\u0301", "naïve", "Ωmega", "日本語", "😀 emoji", "straße", "strasse"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		benchSink += Compare(keys[i%len(keys)], keys[(i+3)%len(keys)])
	}
}
