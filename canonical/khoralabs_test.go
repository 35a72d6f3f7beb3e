package canonical

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"strconv"
	"testing"

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
		// Keys that arrive in order are written as they are, but an
		// array-index key among them still goes first.
		{"keys already in order", `{"a":1,"b":{"c":1,"d":2},"e":3}`, `{"a":1,"b":{"c":1,"d":2},"e":3}`},
		{"index key after ordered keys", `{"!":1,"5":2}`, `{"5":2,"!":1}`},
		// Integers of up to 15 digits are written as they are; from 16
		// digits they are rounded to a double first.
		{"15 digits", `[123456789012345,-999999999999999]`, `[123456789012345,-999999999999999]`},
		{"16 digits round", `9999999999999999`, `10000000000000000`},
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
	inOrderDup := Value{Kind: Object, Obj: []Member{{Key: "a", Value: Value{Kind: Null}}, {Key: "a", Value: Value{Kind: Null}}}}
	if _, err := Khoralabs.AppendCanonical(nil, inOrderDup); !errors.Is(err, ErrDuplicateKey) {
		t.Errorf("duplicate keys in order: err = %v, want ErrDuplicateKey", err)
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
