package canonical

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// appendByPieces writes v the way a fixed-shape CHP writer does: members in
// sorted order, every key and string through AppendChpStableString, the
// chp-stable-v1 separators, integers as written.
func appendByPieces(t *testing.T, b []byte, v Value) []byte {
	t.Helper()
	switch v.Kind {
	case Null:
		return append(b, "null"...)
	case Bool:
		if v.Bool {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	case Number:
		if strings.ContainsAny(v.Str, ".eE") || v.Str == "-0" {
			t.Fatalf("vector holds %s, which a fixed-shape writer never writes", v.Str)
		}
		return append(b, v.Str...)
	case String:
		return AppendChpStableString(b, v.Str)
	case Array:
		b = append(b, '[')
		for i, x := range v.Arr {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendByPieces(t, b, x)
		}
		return append(b, ']')
	default:
		members := slices.Clone(v.Obj)
		slices.SortFunc(members, func(x, y Member) int { return strings.Compare(x.Key, y.Key) })
		b = append(b, '{')
		for i, m := range members {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = AppendChpStableString(b, m.Key)
			b = append(b, ": "...)
			b = appendByPieces(t, b, m.Value)
		}
		return append(b, '}')
	}
}

// TestChpStablePieces: the pieces reproduce the CHP project's chp-stable-v1
// vectors byte for byte, and CompactChpStable turns each expected form into
// the compact form (the same bytes with "," and ":" as separators, which
// is what the genesis profile writes for integer-only content).
func TestChpStablePieces(t *testing.T) {
	cases := field(t, readTree(t, "chp/cases.json"), "cases")
	if len(cases.Arr) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range cases.Arr {
		name, want := str(t, c, "name"), str(t, c, "expected_canon")
		t.Run(name, func(t *testing.T) {
			in := field(t, c, "input")
			if got := string(appendByPieces(t, nil, in)); got != want {
				t.Errorf("pieces:\n got  %q\n want %q", got, want)
			}
			compact := canon(t, Genesis, in)
			if got := string(CompactChpStable(nil, []byte(want))); got != compact {
				t.Errorf("compact:\n got  %q\n want %q", got, compact)
			}
		})
	}
}

func TestCompactChpStable(t *testing.T) {
	for in, want := range map[string]string{
		`{"a": 1, "b": [1, 2], "c": "x, y: z \" w"}`: `{"a":1,"b":[1,2],"c":"x, y: z \" w"}`,
		`{"k\\": "v \\\" ,: "}`:                      `{"k\\":"v \\\" ,: "}`,
		`[]`:                                         `[]`,
		`"a b", 1`:                                   `"a b",1`,
	} {
		if got := string(CompactChpStable([]byte("x"), []byte(in))); got != "x"+want {
			t.Errorf("%s: %s, want x%s", in, got, want)
		}
	}
}

// checkChpStableString compares AppendChpStableString with the generic
// profile on s (made valid first, as the function documents).
func checkChpStableString(t *testing.T, s string) {
	t.Helper()
	valid := s
	if _, err := appendASCIIString(nil, s); err != nil {
		valid = strings.ToValidUTF8(s, "\uFFFD")
	}
	want, err := ChpStableV1.AppendCanonical([]byte("x"), Value{Kind: String, Str: valid})
	if err != nil {
		t.Fatalf("%+q: generic profile: %v", s, err)
	}
	if got := AppendChpStableString([]byte("x"), s); string(got) != string(want) {
		t.Fatalf("%+q: %s, want %s", s, got, want)
	}
	back, err := Parse(want[1:])
	if err != nil || (utf8.ValidString(s) && back.Str != s) {
		t.Fatalf("%+q: %s reads back as %+q (%v)", s, want[1:], back.Str, err)
	}
}

// TestAppendChpStableString: every byte value at every position of short
// strings, lone surrogates and invalid UTF-8 included.
func TestAppendChpStableString(t *testing.T) {
	for n := range 10 {
		for p := range n {
			for c := range 256 {
				b := []byte("abcdefghij"[:n])
				b[p] = byte(c)
				checkChpStableString(t, string(b))
			}
		}
	}
	for _, s := range []string{"", "évt_😀", "\xed\xa0\x80", "a\xffb\xed\xa0\x80", "\u2028<&>", strings.Repeat("x\"", 40)} {
		checkChpStableString(t, s)
	}
}

// FuzzAppendChpStableString: any string is written as the generic profile
// writes it (after U+FFFD replacement of invalid UTF-8).
func FuzzAppendChpStableString(f *testing.F) {
	f.Add("evt_0123456789abcdef0123456789abcdef")
	f.Add("2026-11-22T02:12:29.092387Z\x7f")
	f.Add("\x1f\x20\"\\~\x80\xff")
	f.Fuzz(checkChpStableString)
}

// plainASCIIByTable is isPlainASCII one byte at a time.
func plainASCIIByTable(s string) bool {
	for i := 0; i < len(s); i++ {
		if !asciiSafe[s[i]] {
			return false
		}
	}
	return true
}

// TestIsPlainASCII: every byte value, at every position of a word and of
// the tail, is judged as the table judges it.
func TestIsPlainASCII(t *testing.T) {
	for n := range 20 {
		for p := range n {
			for c := range 256 {
				b := []byte("abcdefghijklmnopqrstuvwxyz"[:n])
				b[p] = byte(c)
				if got, want := isPlainASCII(string(b)), plainASCIIByTable(string(b)); got != want {
					t.Fatalf("%q: %v, want %v", b, got, want)
				}
			}
		}
	}
}

// FuzzIsPlainASCII: the word-at-a-time scan agrees with the table.
func FuzzIsPlainASCII(f *testing.F) {
	f.Add("evt_0123456789abcdef0123456789abcdef")
	f.Add("2026-11-22T02:12:29.092387Z\x7f")
	f.Add("\x1f\x20\"\\~\x80\xff")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isPlainASCII(s), plainASCIIByTable(s); got != want {
			t.Fatalf("%q: %v, want %v", s, got, want)
		}
	})
}
