package canonical

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/canonical/collate"
	"github.com/google/go-cmp/cmp"
)

// TestKhoralabsNodeCases replays testdata/khoralabs/cases.json: JSON texts
// and the canonical strings and hashes Node.js v20.20.2 computes for them
// with hashPlainObject's algorithm (see gen.mjs there).
func TestKhoralabsNodeCases(t *testing.T) {
	raw, err := os.ReadFile("testdata/khoralabs/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Parse(raw) // our reader keeps lone surrogates, encoding/json would not
	if err != nil {
		t.Fatal(err)
	}
	cases := khField(doc, "cases").Arr
	if len(cases) < 200 {
		t.Fatalf("only %d cases", len(cases))
	}
	for i, c := range cases {
		in, want, wantHash := khField(c, "in").Str, khField(c, "canonical").Str, khField(c, "hash").Str
		v, err := Parse([]byte(in))
		if err != nil {
			t.Errorf("case %d: Parse(%s): %v", i, in, err)
			continue
		}
		got, err := Khoralabs.AppendCanonical(nil, v)
		if err != nil {
			t.Errorf("case %d: %s: %v", i, in, err)
			continue
		}
		if diff := cmp.Diff(want, string(got)); diff != "" {
			t.Errorf("case %d: %s (-node +go):\n%s", i, in, diff)
			continue
		}
		sum := sha256.Sum256(got)
		if h := hex.EncodeToString(sum[:]); h != wantHash {
			t.Errorf("case %d: hash %s, node %s", i, h, wantHash)
		}
	}
}

func khField(v Value, key string) Value {
	for _, m := range v.Obj {
		if m.Key == key {
			return m.Value
		}
	}
	return Value{}
}

// Each pitfall of HASHING.md §2 and §7 as a table row.
func TestKhoralabsPitfalls(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"array-index keys hoisted", `{"b":1,"10":2,"2":3,"a":4}`, `{"2":3,"10":2,"a":4,"b":1}`},
		{"non-index numeric keys collate", `{"01":1,"-1":2,"4294967295":3,"4294967294":4,"1.5":5}`, `{"4294967294":4,"-1":2,"01":1,"1.5":5,"4294967295":3}`},
		{"collation not code units", `{"B":1,"a":2,"_":3,"-":4,"0":5,"~":6,"é":7,"f":8}`, `{"0":5,"_":3,"-":4,"~":6,"a":2,"B":1,"é":7,"f":8}`},
		{"lower case first", `{"aB":1,"ab":2,"A":3,"a":4}`, `{"a":4,"A":3,"ab":2,"aB":1}`},
		{"tie keeps input order", `{"e\u0301":1,"\u00e9":2}`, "{\"e\u0301\":1,\"\u00e9\":2}"},
		{"tie keeps input order reversed", `{"\u00e9":2,"e\u0301":1}`, "{\"\u00e9\":2,\"e\u0301\":1}"},
		{"ignorable controls tie", `{"a\u0001":1,"a":2}`, `{"a\u0001":1,"a":2}`},
		{"nested", `{"z":1,"a":{"c":1,"b":2}}`, `{"a":{"b":2,"c":1},"z":1}`},
		{"arrays keep order", `[3,1,{"b":1,"a":2}]`, `[3,1,{"a":2,"b":1}]`},
		{"-0", `-0`, `0`},
		{"1e21", `1e21`, `1e+21`},
		{"1e20", `1e20`, `100000000000000000000`},
		{"1e-7", `1e-7`, `1e-7`},
		{"1.5e-7", `1.5e-7`, `1.5e-7`},
		{"0.000001", `0.000001`, `0.000001`},
		{"0.1+0.2", `0.30000000000000004`, `0.30000000000000004`},
		{"1.0", `1.0`, `1`},
		{"1E+2", `1E+2`, `100`},
		{"beyond 2^53", `9007199254740993`, `9007199254740992`},
		{"big integer", `12345678901234567890`, `12345678901234567000`},
		{"min subnormal", `5e-324`, `5e-324`},
		{"max double", `1.7976931348623157e308`, `1.7976931348623157e+308`},
		{"overflow is Infinity is null", `[1e400,-1e400]`, `[null,null]`},
		{"underflow", `1e-400`, `0`},
		{"U+2028 raw", `"\u2028\u2029"`, "\"\u2028\u2029\""},
		{"html raw", `"<>&'/"`, `"<>&'/"`},
		{"controls lowercase", `"\u0000\u001f\u007f\b\t\n\f\r"`, "\"\\u0000\\u001f\u007f\\b\\t\\n\\f\\r\""},
		{"lone surrogate", `"x\uD800y\uDFFF"`, `"x\ud800y\udfff"`},
		{"surrogate pair raw", `"\ud83d\ude00"`, `"😀"`},
		{"__proto__ is a key", `{"b":1,"__proto__":2}`, `{"__proto__":2,"b":1}`},
		{"empty", `{}`, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize(Khoralabs, []byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestKhoralabsRegistered(t *testing.T) {
	p, err := ProfileByName("khoralabs")
	if err != nil || p != Khoralabs {
		t.Fatalf("ProfileByName(khoralabs) = %v, %v", p, err)
	}
}

func TestKhoralabsErrors(t *testing.T) {
	dup := Value{Kind: Object, Obj: []Member{{Key: "a", Value: Value{Kind: Null}}, {Key: "b"}, {Key: "a"}}}
	if _, err := Khoralabs.AppendCanonical(nil, dup); !errors.Is(err, ErrDuplicateKey) {
		t.Errorf("duplicate keys: err = %v, want ErrDuplicateKey", err)
	}
	bad := Value{Kind: Array, Arr: []Value{{Kind: Number, Str: "01"}}}
	if _, err := Khoralabs.AppendCanonical(nil, bad); !errors.Is(err, ErrInvalidNumber) {
		t.Errorf("invalid number: err = %v, want ErrInvalidNumber", err)
	}
	inv := Value{Kind: String, Str: "\xff"}
	if _, err := Khoralabs.AppendCanonical(nil, inv); !errors.Is(err, ErrInvalidUTF8) {
		t.Errorf("invalid UTF-8: err = %v, want ErrInvalidUTF8", err)
	}
}

func TestArrayIndex(t *testing.T) {
	for _, k := range []string{"0", "2", "10", "4294967294"} {
		if _, ok := ArrayIndex(k); !ok {
			t.Errorf("ArrayIndex(%q) = false", k)
		}
	}
	for _, k := range []string{"", "01", "-1", "1.5", "1e3", " 1", "4294967295", "99999999999", "a"} {
		if _, ok := ArrayIndex(k); ok {
			t.Errorf("ArrayIndex(%q) = true", k)
		}
	}
}

// jsEqual reports whether two trees are the same JavaScript value: same
// member sets (any order), numbers equal as doubles.
func jsEqual(a, b Value) bool {
	if a.Kind != b.Kind {
		// 1e400 reads as Infinity and is written as null.
		if a.Kind == Number && b.Kind == Null {
			f, _ := strconv.ParseFloat(a.Str, 64)
			return math.IsInf(f, 0)
		}
		return false
	}
	switch a.Kind {
	case Null:
		return true
	case Bool:
		return a.Bool == b.Bool
	case String:
		return a.Str == b.Str
	case Number:
		x, _ := strconv.ParseFloat(a.Str, 64)
		y, _ := strconv.ParseFloat(b.Str, 64)
		return x == y
	case Array:
		if len(a.Arr) != len(b.Arr) {
			return false
		}
		for i := range a.Arr {
			if !jsEqual(a.Arr[i], b.Arr[i]) {
				return false
			}
		}
		return true
	case Object:
		if len(a.Obj) != len(b.Obj) {
			return false
		}
		for _, m := range a.Obj {
			found := false
			for _, n := range b.Obj {
				if n.Key == m.Key {
					found = jsEqual(m.Value, n.Value)
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	}
	return false
}

// FuzzKhoralabs: for any input the reader accepts, the canonical output is
// valid JSON that reads back to the same JavaScript value, and
// canonicalizing it again changes nothing. Nothing panics.
func FuzzKhoralabs(f *testing.F) {
	for _, s := range []string{`{"b":1,"10":2,"2":3,"a":4}`, `{"e\u0301":1,"\u00e9":2}`, `[1e21,-0,1e400,"\ud800"]`, `{"a":{"c":[{"z":null}]}}`, `"\u2028"`, `{"a\u0001":1,"a":2,"A":3}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(data)
		if err != nil {
			return
		}
		out, err := Khoralabs.AppendCanonical(nil, v)
		if err != nil {
			return
		}
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("output %q does not parse: %v", out, err)
		}
		if !jsEqual(v, back) {
			t.Fatalf("output %q reads back to a different value than %q", out, data)
		}
		again, err := Khoralabs.AppendCanonical(nil, back)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not idempotent: %q then %q (%v)", out, again, err)
		}
	})
}

// BenchmarkKhoralabsHash is canonicalize + SHA-256 of the ~2 KB sample
// document under the khoralabs profile; compare with BenchmarkFloor
// (encoding/json Marshal + SHA-256 of the same document) in the same run.
func BenchmarkKhoralabsHash(b *testing.B) {
	v, _ := benchDocs(b)
	b.SetBytes(int64(len(sampleDoc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := HashValue(Khoralabs, v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKhoralabsSHA256Only is SHA-256 over the already-canonical bytes:
// the floor the fingerprint target (≤ 3×) is measured against.
func BenchmarkKhoralabsSHA256Only(b *testing.B) {
	v, _ := benchDocs(b)
	out, err := Khoralabs.AppendCanonical(nil, v)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(sampleDoc)))
	b.ReportAllocs()
	for b.Loop() {
		_ = sha256.Sum256(out)
	}
}

// TestAppendJSString: the word-at-a-time writer gives the bytes (and the
// errors) of the plain byte loop of Value.AppendJSON on strings that put
// every kind of byte at every offset of an 8-byte word.
func TestAppendJSString(t *testing.T) {
	pieces := []string{"a", "~", " ", "\x7f", "\"", "\\", "\x00", "\x1f", "\n", "\t", "é", "€", "😀", "\u2028", "\xed\xa0\x80", "\xed\xbf\xbf", "\xff", "\xc3", "\xe2\x82", "<&>", "abcdefgh", "abcdefghijklmno"}
	for _, p := range pieces {
		for _, q := range pieces {
			for pad := range 10 {
				s := strings.Repeat("x", pad) + p + strings.Repeat("y", 9-pad) + q
				want, werr := appendWTF8String(nil, s)
				got, gerr := AppendJSString(nil, s)
				if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
					t.Fatalf("AppendJSString(%+q) error %v, want %v", s, gerr, werr)
				}
				if werr == nil && string(got) != string(want) {
					t.Fatalf("AppendJSString(%+q) = %+q, want %+q", s, got, want)
				}
			}
		}
	}
}

// FuzzJSString: AppendJSString agrees with the reference byte loop on any
// byte string.
func FuzzJSString(f *testing.F) {
	for _, s := range []string{"", "plain ascii text!", "\"\\\x00\x1f\x7f", "é€😀\u2028", "\xed\xa0\x80x\xed\xbf\xbf", "\xff\xc3(", "12345678\"12345678"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, werr := appendWTF8String(nil, s)
		got, gerr := AppendJSString(nil, s)
		if (werr == nil) != (gerr == nil) || (werr == nil && string(got) != string(want)) {
			t.Fatalf("AppendJSString(%+q) = %+q, %v; want %+q, %v", s, got, gerr, want, werr)
		}
	})
}

// TestShortDecimalMatchesFloat: the literal fast path writes what the
// float64 path (ParseFloat + Number::toString) writes, for every literal it
// accepts among hand-picked edge cases and a random sample.
func TestShortDecimalMatchesFloat(t *testing.T) {
	lits := []string{"0.0", "-0.0", "0.5", "-0.25", "0.000005", "-0.0000005", "0.00000", "10.01", "1.10", "0.1000001", "12345678901.25", "-1234567890123.5", "-0.000", "1.0", "1.50", "12.5", "180.25", "0.1", "0.000001", "0.0000010", "0.0000001", "0.00000123", "-3.14159",
		"123456789012345.0", "12345678901234.5", "1234567890123456.0", "0.123456789012345", "0.1234567890123456", "999999999999999.9",
		"100000000000000000000.5", "1.", ".5", "01.5", "1.5e3", "1.5E-3", "-", "-.5", "1.5x", "9007199254740993.0",
		"1e-7", "1E+2", "12.5e20", "1e21", "1e20", "1.5e-7", "0.000001e0", "1e-6", "1e-300", "1e-301", "1e300", "1e301", "9.99e300",
		"123456789012345e-300", "0e5", "-0e-5", "1e", "1e+", "1e0400", "1e00001", "1.0e-0", "100e-2", "0.00100e3", "4.9e-324", "1.7976931348623157e308"}
	r := rand.New(rand.NewPCG(5, 6))
	for range 20000 {
		var s strings.Builder
		if r.IntN(2) == 0 {
			s.WriteByte('-')
		}
		s.WriteString(strconv.Itoa(r.IntN(1000000) * (r.IntN(3) % 2)))
		if r.IntN(4) > 0 {
			s.WriteByte('.')
			for range 1 + r.IntN(17) {
				s.WriteByte(byte('0' + r.IntN(10)))
			}
		}
		if r.IntN(2) == 0 {
			s.WriteByte("eE"[r.IntN(2)])
			s.WriteString([]string{"", "+", "-"}[r.IntN(3)])
			s.WriteString(strconv.Itoa(r.IntN(330)))
		}
		lits = append(lits, s.String())
	}
	hits := 0
	for _, lit := range lits {
		checkJSNumber(t, lit)
		got, ok := appendShortDecimal(nil, lit)
		if !ok {
			continue
		}
		hits++
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil || !validNumber(lit) {
			t.Fatalf("fast path accepted %q, which is not a valid literal", lit)
		}
		if want := string(AppendJSNumber(nil, f)); string(got) != want {
			t.Errorf("%q: fast path %q, float path %q", lit, got, want)
		}
	}
	if hits < 10000 {
		t.Errorf("fast path taken only %d times", hits)
	}
}

// checkJSNumber: appendJSNumber, with its literal fast paths, writes what
// ParseFloat + Number::toString writes for a valid literal, and refuses an
// invalid one.
func checkJSNumber(t *testing.T, lit string) {
	t.Helper()
	got, err := appendJSNumber(nil, lit)
	if !validNumber(lit) {
		if err == nil {
			t.Fatalf("appendJSNumber(%q) = %q, want ErrInvalidNumber", lit, got)
		}
		return
	}
	f, perr := strconv.ParseFloat(lit, 64)
	if perr != nil && !math.IsInf(f, 0) {
		t.Fatalf("ParseFloat(%q): %v", lit, perr)
	}
	if want := string(AppendJSNumber(nil, f)); err != nil || string(got) != want {
		t.Fatalf("appendJSNumber(%q) = %q, %v; float path %q", lit, got, err, want)
	}
}

// FuzzShortDecimal: whenever the literal fast path (decimals and
// exponents of up to 15 significant digits) accepts a string, it writes
// what ParseFloat + Number::toString writes.
func FuzzShortDecimal(f *testing.F) {
	for _, s := range []string{"1.50", "-0.0", "0.000001", "0.0000001", "123456789012345.0", "0.1234567890123456", "1e5", "01.5", "1e-7", "12.5e20", "1e-300", "0.00100e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		checkJSNumber(t, lit)
		got, ok := appendShortDecimal(nil, lit)
		if !ok {
			return
		}
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil || !validNumber(lit) {
			t.Fatalf("fast path accepted %q, which is not a valid literal", lit)
		}
		if want := string(AppendJSNumber(nil, f)); string(got) != want {
			t.Fatalf("%q: fast path %q, float path %q", lit, got, want)
		}
	})
}

// TestKhoralabsQuickOrderMatchesGeneral: the encoder's quick member order
// (integer prefixes, insertion sort) gives exactly the order, tie order and
// duplicate verdicts of the general path (KhoralabsKeyOrder), over random
// objects of up to 40 keys drawn from index keys, simple ASCII keys that
// share long prefixes or differ only in case, keys with controls or
// non-ASCII before and after the eighth byte, collation ties and
// duplicates.
func TestKhoralabsQuickOrderMatchesGeneral(t *testing.T) {
	// bucketOrder's 128-bit sets and nameBit both need ranks below 0x80.
	for c := range 256 {
		if r := collate.SimpleRank(byte(c)); r >= 0x80 {
			t.Fatalf("SimpleRank(%#x) = %d, want < 128", c, r)
		}
	}
	atoms := []string{"a", "A", "b", "B", "z", "_", "-", " ", "\t", "0", "1", "9", "~", "\x7f", "\x01", "é", "e\u0301", "ß", "😀", "\xed\xa0\x80"}
	r := rand.New(rand.NewPCG(11, 12))
	word := func() string {
		switch r.IntN(6) {
		case 0:
			return strconv.Itoa(r.IntN(30)) // index keys (and "0" …)
		case 1:
			return []string{"4294967294", "4294967295", "01", "-1", "1.5", ""}[r.IntN(6)]
		case 2:
			return "capability_" + atoms[r.IntN(len(atoms))] // a shared 11-byte prefix
		}
		var b strings.Builder
		for range 1 + r.IntN(10) {
			if r.IntN(4) == 0 {
				b.WriteString(atoms[r.IntN(len(atoms))])
			} else {
				b.WriteByte("abcdefgABCDEFG_"[r.IntN(15)])
			}
		}
		return b.String()
	}
	for range 20000 {
		n := 1 + r.IntN(12)
		if r.IntN(20) == 0 {
			n = 20 + r.IntN(21)
		}
		obj := make([]Member, n)
		for i := range obj {
			obj[i].Key = word()
			if i > 0 && r.IntN(8) == 0 {
				obj[i].Key = obj[r.IntN(i)].Key // a duplicate
			}
		}
		want := make([]int32, n)
		for i := range want {
			want[i] = int32(i)
		}
		wantErr := KhoralabsKeyOrder(obj, want)
		// Both the encoder's path (smallOrder first) and
		// order alone (bucketOrder, prefixes) must agree with it.
		for _, small := range []bool{true, false} {
			got, gotErr := encoderOrder(obj, small)
			if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
				t.Fatalf("keys %q (small %v): order error %v, general path %v", keysOf(obj), small, gotErr, wantErr)
			}
			if gotErr == nil && !slices.Equal(got, want) {
				t.Fatalf("keys %q (small %v):\norder   %v\ngeneral %v", keysOf(obj), small, got, want)
			}
		}
	}
}

// encoderOrder is the member order the encoder computes for obj: by
// smallOrder first, as the object writer orders, when small, else by order alone
// (bucketOrder, prefixes).
func encoderOrder(obj []Member, small bool) ([]int32, error) {
	e := khPool.Get().(*khEncoder)
	defer khPool.Put(e)
	var scratch [maxSmallOrder]uint16
	var ents []khEnt
	var err error
	if small {
		// As the object writer does: smallOrder first, then pushOrder.
		var done bool
		if done, err = smallOrder(obj, &scratch); !done {
			ents, err = e.pushOrder(obj)
		}
		if err != nil {
			return nil, err
		}
		if ents == nil {
			got := make([]int32, len(obj))
			for i := range got {
				got[i] = int32(uint8(scratch[i]))
			}
			return got, nil
		}
	} else {
		err = e.order(obj)
		ents = e.ents
	}
	got := make([]int32, 0, len(obj))
	for _, x := range ents {
		got = append(got, x.x)
	}
	e.ents = e.ents[:0]
	return got, err
}

func keysOf(obj []Member) []string {
	var ks []string
	for _, m := range obj {
		ks = append(ks, m.Key)
	}
	return ks
}

// TestAppendPlainJSString: the fused check-and-copy writes exactly what
// AppendJSString writes whenever it accepts a string, and accepts exactly
// the strings made only of printable ASCII and DEL other than '"' and '\',
// for every length up to 40 and every byte value at every position, in
// ASCII and in non-ASCII text.
func TestAppendPlainJSString(t *testing.T) {
	prefix := []byte("x,")
	forEachByteAtEachPosition(func(s []byte) {
		got, ok := appendPlainJSString(append([]byte(nil), prefix...), string(s))
		wantOK := true
		for _, x := range s {
			wantOK = wantOK && jsPlain[x]
		}
		if ok != wantOK {
			t.Fatalf("appendPlainJSString(%q) ok = %v, want %v", s, ok, wantOK)
		}
		if !ok {
			if string(got[:len(prefix)]) != string(prefix) || len(got) != len(prefix) {
				t.Fatalf("appendPlainJSString(%q) changed b on refusal: %q", s, got)
			}
			return
		}
		want, _ := AppendJSString(append([]byte(nil), prefix...), string(s))
		if string(got) != string(want) {
			t.Fatalf("appendPlainJSString(%q) = %q, want %q", s, got, want)
		}
	})
}

// forEachByteAtEachPosition calls f with every string made of the first n
// bytes (n up to 40) of an ASCII and of a non-ASCII text, with every byte
// value put at every position.
func forEachByteAtEachPosition(f func(s []byte)) {
	for _, base := range [][]byte{[]byte("The quick brown fox jumps over lazy dogs!"), []byte("δέλτα île Zoë 😀 région ünïcødé ok")} {
		for n := 0; n <= 40; n++ {
			for pos := 0; pos < max(n, 1); pos++ {
				for c := range 256 {
					s := append([]byte(nil), base[:n]...)
					if n > 0 {
						s[pos] = byte(c)
					}
					f(s)
				}
			}
		}
	}
}

// FuzzKhoralabsOrder: for any list of keys (the input split at '|'), the
// encoder's member order — buckets, prefixes, the general path — equals
// KhoralabsKeyOrder's, duplicates and ties included.
func FuzzKhoralabsOrder(f *testing.F) {
	for _, s := range []string{"b|10|2|a", "type|tags|Type|t", "é|e\u0301|a\u0001|a", "|a||b", "capability_id|capability_version|capability_", "0|01|-1|4294967294|4294967295"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		keys := strings.Split(s, "|")
		if len(keys) > 80 {
			keys = keys[:80]
		}
		obj := make([]Member, len(keys))
		for i, k := range keys {
			obj[i].Key = k
		}
		want := make([]int32, len(obj))
		for i := range want {
			want[i] = int32(i)
		}
		wantErr := KhoralabsKeyOrder(obj, want)
		got, gotErr := encoderOrder(obj, true)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("keys %q: order error %v, general path %v", keys, gotErr, wantErr)
		}
		if gotErr == nil && len(obj) > 1 && !slices.Equal(got, want) {
			t.Fatalf("keys %q:\norder   %v\ngeneral %v", keys, got, want)
		}
	})
}

// TestHasASCIIEscape: the word-wise check agrees with a byte loop for
// every byte at every position of strings of up to 17 bytes, between
// plain ASCII and between bytes from 0x80 (which must never flag, nor let
// a borrow flag, anything).
func TestHasASCIIEscape(t *testing.T) {
	for _, fill := range []byte{'a', 0x80, 0xff, 0x21} {
		for n := 1; n <= 17; n++ {
			for at := range n {
				for c := range 256 {
					s := []byte(strings.Repeat(string(fill), n))
					s[at] = byte(c)
					want := c < 0x20 || c == '"' || c == '\\'
					if got := hasASCIIEscape(string(s)); got != want {
						t.Fatalf("hasASCIIEscape(%+q) = %v, want %v", s, got, want)
					}
				}
			}
		}
	}
}

// TestAppendShort: the word-wise copy appends exactly what append does,
// for every length up to 20 and behind buffers with and without room.
func TestAppendShort(t *testing.T) {
	src := "0123456789abcdefghijKLMN"
	for n := 0; n <= 20; n++ {
		s := src[3 : 3+n]
		for _, pre := range [][]byte{nil, []byte("x,"), make([]byte, 5, 21), make([]byte, 30, 31)} {
			pre = slices.Clip(pre)
			want := append(slices.Clone(pre), s...)
			got := appendShort(slices.Clone(pre), s)
			if !bytes.Equal(got, want) {
				t.Fatalf("appendShort(%q, %q) = %q, want %q", pre, s, got, want)
			}
			roomy := append(make([]byte, 0, len(pre)+40), pre...)
			if got := appendShort(roomy, s); !bytes.Equal(got, want) {
				t.Fatalf("appendShort with room (%q, %q) = %q, want %q", pre, s, got, want)
			}
		}
	}
}

// TestAppendJSStringSlow: the path for strings that are not plain ASCII
// (whole-string checks, then a copy or the escaper) writes what the
// byte-by-byte escaper writes, and fails where it fails, for every length
// up to 40 and every byte value at every position of ASCII and non-ASCII
// text.
func TestAppendJSStringSlow(t *testing.T) {
	prefix := []byte("x,")
	forEachByteAtEachPosition(func(s []byte) {
		got, err := appendJSStringSlow(slices.Clone(prefix), string(s))
		want, wantErr := appendJSStringFrom(append(slices.Clone(prefix), '"'), string(s), 0)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("appendJSStringSlow(%q): error %v, escaper %v", s, err, wantErr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("appendJSStringSlow(%q) = %q, want %q", s, got, want)
		}
	})
}

// TestPlainNumberExhaustive: every literal of up to 5 bytes over digits,
// signs, points, exponents and junk — and a random sample of 6 to 9 bytes —
// is written by appendJSNumber as ParseFloat + Number::toString writes it
// (or refused if invalid), and whatever appendPlainNumber takes it copies
// as that path writes it.
func TestPlainNumberExhaustive(t *testing.T) {
	const alphabet = "0159-.eE+x"
	check := func(lit string) {
		checkJSNumber(t, lit)
		got, ok := appendPlainNumber([]byte("x"), lit)
		if !ok {
			if string(got) != "x" {
				t.Fatalf("appendPlainNumber(%q) refused but wrote %q", lit, got)
			}
			return
		}
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil || !validNumber(lit) {
			t.Fatalf("appendPlainNumber took %q, which is not a valid literal", lit)
		}
		if want := "x" + string(AppendJSNumber(nil, f)); string(got) != want {
			t.Fatalf("appendPlainNumber(%q) = %q, want %q", lit, got, want)
		}
	}
	var rec func(prefix []byte, left int)
	rec = func(prefix []byte, left int) {
		if len(prefix) > 0 {
			check(string(prefix))
		}
		if left == 0 {
			return
		}
		for i := range len(alphabet) {
			rec(append(prefix, alphabet[i]), left-1)
		}
	}
	rec(make([]byte, 0, 5), 5)
	r := rand.New(rand.NewPCG(7, 8))
	for range 200000 {
		n := 6 + r.IntN(4)
		s := make([]byte, n)
		for i := range s {
			switch r.IntN(12) {
			case 0:
				s[i] = '.'
			case 1:
				s[i] = '-'
			case 2:
				s[i] = byte(r.IntN(256))
			default:
				s[i] = byte('0' + r.IntN(10))
			}
		}
		check(string(s))
	}
}

// TestKhoralabsEncoderReuse: one encoder writes document after document —
// small, huge (past the scratch space it keeps), with errors and stops in
// between — exactly as AppendKhoralabsUntil writes each.
func TestKhoralabsEncoderReuse(t *testing.T) {
	var big strings.Builder
	big.WriteString("{")
	for i := range 70000 {
		if i > 0 {
			big.WriteByte(',')
		}
		fmt.Fprintf(&big, `"k%d":[%d,{"b":1,"a":2}]`, 70000-i, i)
	}
	big.WriteString("}")
	docs := []string{`{"b":1,"a":[{"d":1,"c":"x"}],"10":true,"2":null}`, big.String(), `{"x":{"$undefined":true}}`, `{"é":1,"e":2,"E":3}`, `[1.50,"a\u0001",{"z":{},"y":[]}]`}
	stop := func(k string) bool { return k == "$undefined" }
	var enc KhoralabsEncoder
	for round := range 2 {
		for _, doc := range docs {
			v, err := Parse([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			got, gotStopped, gotErr := enc.AppendUntil([]byte("x"), &v, stop)
			want, wantStopped, wantErr := AppendKhoralabsUntil([]byte("x"), &v, stop)
			if gotStopped != wantStopped || (gotErr == nil) != (wantErr == nil) || gotErr == nil && !bytes.Equal(got, want) {
				t.Fatalf("round %d, document %.40q: encoder %.60q %v %v, AppendKhoralabsUntil %.60q %v %v", round, doc, got, gotStopped, gotErr, want, wantStopped, wantErr)
			}
		}
		bad := Value{Kind: Object, Obj: []Member{{Key: "a", Value: Value{Kind: Number, Str: "1"}}, {Key: "a", Value: Value{Kind: Null}}}}
		if _, _, err := enc.AppendUntil(nil, &bad, nil); !errors.Is(err, ErrDuplicateKey) {
			t.Fatalf("duplicate keys: %v, want ErrDuplicateKey", err)
		}
	}
}

// TestWritersStoreNothingPastTheirOutput: the word-wise writers (strings,
// short copies, numbers, whole documents) append into a buffer whose
// spare capacity may belong to the caller; they must leave every byte
// past what they return as it was.
func TestWritersStoreNothingPastTheirOutput(t *testing.T) {
	var strs []string
	for n := 0; n <= 20; n++ {
		strs = append(strs, "abcdefghijklmnopqrstuvwxyz"[:n], strings.Repeat("é", n/2), "a\"b"[:min(n, 3)])
	}
	nums := []string{"0", "-0", "1", "12", "-12", "123", "1234", "12345", "-123456", "1234567", "12345678", "1.5", "-0.25", "12.125", "1.50", "1e-7", "123456789", "1234567890.5", "1e400"}
	docs := []string{`{"b":1,"a":[1.5,"x",{"d":-0,"c":"é"}],"10":true,"2":null}`, `[0,12,-3.5,"",{}]`, `{"k":"v"}`}
	check := func(name string, write func([]byte) []byte) {
		t.Helper()
		for _, k := range []int{0, 3} {
			// (An output that outgrows the buffer moves; what was written
			// before the move is the caller's as with append.)
			backing := bytes.Repeat([]byte{'X'}, 128)
			out := write(backing[:k])
			for i := len(out); i < len(backing); i++ {
				if backing[i] != 'X' {
					t.Fatalf("%s into a buffer of %d: byte %d past the output (%q) changed to %q", name, k, i, out, backing[i])
				}
			}
		}
	}
	for _, s := range strs {
		check(fmt.Sprintf("AppendJSString(%q)", s), func(b []byte) []byte { out, _ := AppendJSString(b, s); return out })
		check(fmt.Sprintf("appendPlainJSString(%q)", s), func(b []byte) []byte { out, _ := appendPlainJSString(b, s); return out })
		check(fmt.Sprintf("appendShort(%q)", s), func(b []byte) []byte { return appendShort(b, s) })
	}
	for _, lit := range nums {
		check(fmt.Sprintf("AppendJSNumberLiteral(%q)", lit), func(b []byte) []byte { out, _ := AppendJSNumberLiteral(b, lit); return out })
		check(fmt.Sprintf("appendPlainNumber(%q)", lit), func(b []byte) []byte { out, _ := appendPlainNumber(b, lit); return out })
	}
	for _, doc := range docs {
		v, err := Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("AppendCanonical(%s)", doc), func(b []byte) []byte { out, _ := Khoralabs.AppendCanonical(b, v); return out })
		var enc KhoralabsEncoder
		check(fmt.Sprintf("KhoralabsEncoder(%s)", doc), func(b []byte) []byte { out, _, _ := enc.AppendUntil(b, &v, nil); return out })
	}
}
