package canonical

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func num(lit string) Value { return Value{Kind: Number, Str: lit} }

func arr(vs ...Value) Value {
	if vs == nil {
		vs = []Value{}
	}
	return Value{Kind: Array, Arr: vs}
}

func TestParseValid(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Value
	}{
		{`null`, Value{Kind: Null}},
		{` true `, Value{Kind: Bool, Bool: true}},
		{"\t\r\nfalse\n", Value{Kind: Bool}},
		// Number literals are kept exactly.
		{`1.0`, num("1.0")},
		{`-0`, num("-0")},
		{`1E+2`, num("1E+2")},
		{`12345678901234567890123`, num("12345678901234567890123")},
		{`-0.000e-0`, num("-0.000e-0")},
		{`1e400`, num("1e400")},
		{`""`, strVal("")},
		{`"a\"b\\c\/d\b\f\n\r\t"`, strVal("a\"b\\c/d\b\f\n\r\t")},
		{`"caf\u00E9 café"`, strVal("café café")},
		{`"\ud83d\udd12🔒"`, strVal("🔒🔒")},
		// Lone surrogates are kept as WTF-8.
		{`"\ud800"`, strVal("\xed\xa0\x80")},
		{`"\udfff\ud800"`, strVal("\xed\xbf\xbf\xed\xa0\x80")},
		{`"\ud83dx"`, strVal("\xed\xa0\xbdx")},
		{`"\ud83d\u0041"`, strVal("\xed\xa0\xbdA")},
		{`[]`, arr()},
		{`[1,[2,[]],{}]`, arr(num("1"), arr(num("2"), arr()), Value{Kind: Object, Obj: []Member{}})},
		// Members stay in input order.
		{`{"z":1,"a":2,"m":{"y":null,"b":[]}}`, obj(
			Member{"z", num("1")}, Member{"a", num("2")},
			Member{"m", obj(Member{"y", Value{Kind: Null}}, Member{"b", arr()})})},
		// Keys that look different but are not equal after unescaping are fine.
		{`{"a":1,"A":2,"\u00e9":3,"é\u0301":4}`, obj(
			Member{"a", num("1")}, Member{"A", num("2")}, Member{"é", num("3")}, Member{"é\u0301", num("4")})},
	} {
		got, err := Parse([]byte(tc.in))
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Parse(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		in     string
		kind   error
		offset int
		detail string
	}{
		{``, ErrSyntax, 0, "unexpected end of input"},
		{`  `, ErrSyntax, 2, "unexpected end of input"},
		{"\xef\xbb\xbf{}", ErrSyntax, 0, "byte-order mark"},
		{`{} {}`, ErrSyntax, 3, "after the JSON value"},
		{`nul`, ErrSyntax, 0, `want "null"`},
		{`True`, ErrSyntax, 0, "want a value"},
		{`[1,]`, ErrSyntax, 3, "want a value"},
		{`[1 2]`, ErrSyntax, 3, "want ',' or ']'"},
		{`{"a" 1}`, ErrSyntax, 5, "want ':'"},
		{`{"a":1,}`, ErrSyntax, 7, "want a string key"},
		{`{a:1}`, ErrSyntax, 1, "want a string key"},
		{`{"a":1`, ErrSyntax, 6, "want ',' or '}'"},
		{`01`, ErrSyntax, 1, "leading zero"},
		{`-`, ErrSyntax, 1, "want a digit"},
		{`+1`, ErrSyntax, 0, "want a value"},
		{`1.`, ErrSyntax, 2, "after '.'"},
		{`.5`, ErrSyntax, 0, "want a value"},
		{`1e`, ErrSyntax, 2, "exponent"},
		{`1e+`, ErrSyntax, 3, "exponent"},
		{`NaN`, ErrSyntax, 0, "want a value"},
		{`Infinity`, ErrSyntax, 0, "want a value"},
		{`"abc`, ErrSyntax, 0, "unterminated string"},
		{"\"a\x01b\"", ErrSyntax, 2, "raw control character 0x01"},
		{"\"tab\there\"", ErrSyntax, 4, "raw control character 0x09"},
		{`"\x"`, ErrSyntax, 1, `invalid escape \x`},
		{`"\u12"`, ErrSyntax, 1, "4 hex digits"},
		{`"\u12G4"`, ErrSyntax, 1, "4 hex digits"},
		{"\"\xff\"", ErrInvalidUTF8, 1, "0xff"},
		{"\"\xc3\"", ErrInvalidUTF8, 1, "0xc3"},
		{"\"\xed\xa0\x80\"", ErrInvalidUTF8, 1, "0xed"}, // a raw surrogate is not UTF-8
		{"\"\xc0\xaf\"", ErrInvalidUTF8, 1, "0xc0"},     // overlong
		{"{\"\xff\":1}", ErrInvalidUTF8, 2, "0xff"},
		{`{"a":1,"a":2}`, ErrDuplicateKey, 7, `duplicate key "a"`},
		{`{"a":1,"\u0061":2}`, ErrDuplicateKey, 7, `duplicate key "a"`},
		{`{"x":{"a":1,"b":{"a":1},"a":3}}`, ErrDuplicateKey, 24, `duplicate key "a"`},
	} {
		_, err := Parse([]byte(tc.in))
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) = %v, want a *ParseError", tc.in, err)
			continue
		}
		if !errors.Is(err, tc.kind) || pe.Offset != tc.offset || !strings.Contains(err.Error(), tc.detail) {
			t.Errorf("Parse(%q) = %v (offset %d, kind %v); want offset %d, kind %v, mentioning %q",
				tc.in, err, pe.Offset, pe.Err, tc.offset, tc.kind, tc.detail)
		}
	}
}

func TestParseDuplicateInLargeObject(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 100 {
		b.WriteString(`"k` + strings.Repeat("x", i) + `":1,`)
	}
	b.WriteString(`"kxxxxx":2}`)
	_, err := Parse([]byte(b.String()))
	if !errors.Is(err, ErrDuplicateKey) || !strings.Contains(err.Error(), `"kxxxxx"`) {
		t.Fatalf("got %v, want duplicate key \"kxxxxx\"", err)
	}
	// And a large object without duplicates parses.
	ok := strings.Replace(b.String(), `"kxxxxx":2}`, `"other":2}`, 1)
	v, err := Parse([]byte(ok))
	if err != nil || len(v.Obj) != 101 {
		t.Fatalf("got %d members, %v", len(v.Obj), err)
	}
}

func TestParseLimits(t *testing.T) {
	deep := func(n int) []byte { return []byte(strings.Repeat("[", n) + strings.Repeat("]", n)) }
	if _, err := Parse(deep(DefaultMaxDepth)); err != nil {
		t.Errorf("depth %d: %v", DefaultMaxDepth, err)
	}
	_, err := Parse(deep(DefaultMaxDepth + 1))
	if !errors.Is(err, ErrTooDeep) {
		t.Errorf("depth %d: got %v, want ErrTooDeep", DefaultMaxDepth+1, err)
	}
	// Objects count too.
	_, err = ParseWith([]byte(`{"a":{"b":[1]}}`), &ParseOptions{MaxDepth: 2})
	if !errors.Is(err, ErrTooDeep) {
		t.Errorf("object depth: got %v, want ErrTooDeep", err)
	}
	if _, err := ParseWith([]byte(`{"a":{"b":1}}`), &ParseOptions{MaxDepth: 2}); err != nil {
		t.Errorf("depth 2 within limit 2: %v", err)
	}
	_, err = ParseWith([]byte(`"0123456789"`), &ParseOptions{MaxBytes: 11})
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("size: got %v, want ErrTooLarge", err)
	}
	if _, err := ParseWith([]byte(`"012345678"`), &ParseOptions{MaxBytes: 11}); err != nil {
		t.Errorf("11 bytes within limit 11: %v", err)
	}
	// A nil *ParseOptions means the defaults.
	if _, err := ParseWith([]byte(`[]`), nil); err != nil {
		t.Error(err)
	}
}

// TestAppendJSONRoundTrip: AppendJSON writes text that Parse reads back to
// the identical tree, including lone surrogates and number literals.
func TestAppendJSONRoundTrip(t *testing.T) {
	in := `{"z":[1.0,-0,1E+2,"\ud800x\u00e9\u2028\ud83d\ude00",{"\u0000":"\u007f"}],"a":{"":null,"t":true}}`
	v, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out, err := v.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(out)
	if err != nil {
		t.Fatalf("Parse(%s): %v", out, err)
	}
	if diff := cmp.Diff(v, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s\nvia %s", diff, out)
	}
	if want := `{"z":[1.0,-0,1E+2,"\ud800xé` + "\u2028" + `😀",{"\u0000":"` + "\x7f" + `"}],"a":{"":null,"t":true}}`; string(out) != want {
		t.Errorf("AppendJSON = %s\nwant          %s", out, want)
	}
}

// TestParseAllocations pins the reader's allocations: the input copied
// once as a string, one array for every element of the document, one for
// every member, one string for all decoded escapes — whatever the size.
func TestParseAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	for _, tc := range []struct {
		doc  string
		want float64
	}{
		{`"plain"`, 1},
		{`[1,2,3]`, 2},
		{`{"a":1}`, 2},
		{`{"a":[1,{"b":"\u00e9"}],"c":[]}`, 4},
		{string(sampleDoc), 3},
	} {
		data := []byte(tc.doc)
		if n := testing.AllocsPerRun(50, func() { Parse(data) }); n != tc.want {
			t.Errorf("Parse(%.40q) allocates %.1f times, want %.0f", tc.doc, n, tc.want)
		}
	}
}

// TestSharedArraysAreIsolated: containers of one document share backing
// arrays, but an append to one can never write into another.
func TestSharedArraysAreIsolated(t *testing.T) {
	v, err := Parse([]byte(`{"a":[1,2],"b":[3],"c":{"x":1},"d":{"y":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	for name, tree := range map[string]Value{"Parse": v} {
		before, _ := tree.AppendJSON(nil)
		a, _ := tree.Get("a")
		_ = append(a.Arr, num("99"))
		c, _ := tree.Get("c")
		_ = append(c.Obj, Member{"z", num("99")})
		after, _ := tree.AppendJSON(nil)
		if string(before) != string(after) {
			t.Errorf("%s: appending to one container changed another:\n%s\n%s", name, before, after)
		}
	}
}

// TestSpecialMask: the lowest flagged byte of a word is the first byte a
// string cannot hold as it is, for every position and kind of such byte.
func TestSpecialMask(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	plain := func() byte { return byte(0x20 + r.IntN(0x60)) } // 0x20..0x7F
	for range 20000 {
		var w [8]byte
		for i := range w {
			w[i] = plain()
			for w[i] == '"' || w[i] == '\\' {
				w[i] = plain()
			}
		}
		first := 8
		if r.IntN(8) > 0 {
			first = r.IntN(8)
			specials := []byte{'"', '\\', 0x00, 0x1f, 0x80, 0xff, 0xc3, 0xed, byte(r.IntN(0x20)), byte(0x80 + r.IntN(0x80))}
			w[first] = specials[r.IntN(len(specials))]
			for i := first + 1; i < 8; i++ {
				w[i] = byte(r.IntN(256)) // anything may follow
			}
		}
		m := specialMask(binary.LittleEndian.Uint64(w[:]))
		got := 8
		if m != 0 {
			got = bits.TrailingZeros64(m) >> 3
		}
		if got != first {
			t.Fatalf("specialMask(% x) flags byte %d first, want %d", w, got, first)
		}
	}
}
