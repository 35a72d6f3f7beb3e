package canonical

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
)

// FuzzParse: the reader never panics on any input; whatever it accepts
// round-trips through AppendJSON; and for every profile that accepts the
// tree, the output is valid JSON that reads back to the same value, and
// canonicalizing it again changes nothing.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"b":[1,2.5,-0,"x"],"a":{"\u00e9":null}}`, `"\ud800"`, `[1e400]`, `{"a":1,"a":2}`,
	} {
		f.Add([]byte(s))
	}
	profiles := []Profile{ChpStableV1, PythonSortKeys, Genesis, JCS, ChpJcsV1}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseWith(data, &ParseOptions{MaxDepth: 64})
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("error %v is %T, want *ParseError", err, err)
			}
			return
		}
		j, err := v.AppendJSON(nil)
		if err != nil {
			t.Fatalf("AppendJSON of a parsed tree: %v", err)
		}
		back, err := Parse(j)
		if err != nil {
			t.Fatalf("Parse(AppendJSON) = %v\n%s", err, j)
		}
		if !identical(v, back) {
			t.Fatalf("AppendJSON round trip changed the tree: %s", j)
		}
		for _, p := range profiles {
			out, err := p.AppendCanonical(nil, v)
			if err != nil {
				continue
			}
			w, err := Parse(out)
			if err != nil {
				t.Fatalf("%s output is not JSON: %v\n%s", p.Name(), err, out)
			}
			if why := sameValue(p, v, w); why != "" {
				t.Fatalf("%s output reads back to a different value: %s\nin:  %s\nout: %s", p.Name(), why, data, out)
			}
			again, err := p.AppendCanonical(nil, w)
			if err != nil || !bytes.Equal(again, out) {
				t.Fatalf("%s is not idempotent: %v\nonce:  %s\ntwice: %s", p.Name(), err, out, again)
			}
		}
	})
}

// identical compares trees exactly: member order and number literals too.
func identical(a, b Value) bool {
	if a.Kind != b.Kind || a.Bool != b.Bool || a.Str != b.Str || len(a.Arr) != len(b.Arr) || len(a.Obj) != len(b.Obj) {
		return false
	}
	for i := range a.Arr {
		if !identical(a.Arr[i], b.Arr[i]) {
			return false
		}
	}
	for i := range a.Obj {
		if a.Obj[i].Key != b.Obj[i].Key || !identical(a.Obj[i].Value, b.Obj[i].Value) {
			return false
		}
	}
	return true
}

// sameValue compares trees as the profile's reference reads them: members as
// a set, numbers by value (Python: int exactly, float as double; JCS: all
// doubles). It returns why they differ, or "".
func sameValue(p Profile, a, b Value) string {
	if a.Kind != b.Kind {
		return fmt.Sprintf("kind %v vs %v", a.Kind, b.Kind)
	}
	switch a.Kind {
	case Bool:
		if a.Bool != b.Bool {
			return "bool"
		}
	case String:
		if a.Str != b.Str {
			return fmt.Sprintf("string %q vs %q", a.Str, b.Str)
		}
	case Number:
		if !sameNumber(p, a.Str, b.Str) {
			return fmt.Sprintf("number %s vs %s", a.Str, b.Str)
		}
	case Array:
		if len(a.Arr) != len(b.Arr) {
			return "array length"
		}
		for i := range a.Arr {
			if why := sameValue(p, a.Arr[i], b.Arr[i]); why != "" {
				return fmt.Sprintf("[%d]: %s", i, why)
			}
		}
	case Object:
		if len(a.Obj) != len(b.Obj) {
			return "object size"
		}
		for _, m := range a.Obj {
			w, ok := b.Get(m.Key)
			if !ok {
				return fmt.Sprintf("missing key %q", m.Key)
			}
			if why := sameValue(p, m.Value, w); why != "" {
				return fmt.Sprintf("[%q]: %s", m.Key, why)
			}
		}
	}
	return ""
}

func sameNumber(p Profile, x, y string) bool {
	isInt := func(s string) bool { return !strings.ContainsAny(s, ".eE") }
	st := p.(*style)
	if st.numbers == numPyIntOnly || st.numbers == numPyRepr {
		if isInt(x) != isInt(y) {
			return false // a Python int never becomes a float or back
		}
		if isInt(x) {
			bx, _ := new(big.Int).SetString(x, 10)
			by, _ := new(big.Int).SetString(y, 10)
			return bx.Cmp(by) == 0
		}
	}
	fx, _ := strconv.ParseFloat(x, 64)
	fy, _ := strconv.ParseFloat(y, 64)
	if st.numbers == numES || st.numbers == numESIntOnly {
		return fx == fy // -0 and 0 are one Number in RFC 8785
	}
	return fx == fy && math.Signbit(fx) == math.Signbit(fy)
}
