package canonical

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestProfileRules pins each profile's rules on small inputs, one rule per
// row, so a failure names the rule that broke.
func TestProfileRules(t *testing.T) {
	type want struct{ stable, python, genesis, jcs, chpjcs string }
	const fl = "!float"  // ErrFloat
	const rng = "!range" // ErrNumberRange
	const lone = "!lone" // ErrLoneSurrogate
	for _, tc := range []struct {
		rule string
		in   string
		want want
	}{
		{"separators", `{"b":[1,2],"a":{}}`, want{`{"a": {}, "b": [1, 2]}`, `{"a": {}, "b": [1, 2]}`, `{"a":{},"b":[1,2]}`, `{"a":{},"b":[1,2]}`, `{"a":{},"b":[1,2]}`}},
		{"ascii escapes", `"é/<>&'\u007f"`, want{`"\u00e9/<>&'\u007f"`, `"\u00e9/<>&'\u007f"`, `"\u00e9/<>&'\u007f"`, "\"é/<>&'\x7f\"", "\"é/<>&'\x7f\""}},
		{"short escapes", `"\b\f\n\r\t\u0000\u001f"`, want{`"\b\f\n\r\t\u0000\u001f"`, `"\b\f\n\r\t\u0000\u001f"`, `"\b\f\n\r\t\u0000\u001f"`, `"\b\f\n\r\t\u0000\u001f"`, `"\b\f\n\r\t\u0000\u001f"`}},
		{"astral", `"😀"`, want{`"\ud83d\ude00"`, `"\ud83d\ude00"`, `"\ud83d\ude00"`, `"😀"`, `"😀"`}},
		{"line separators", `"\u2028\u2029"`, want{`"\u2028\u2029"`, `"\u2028\u2029"`, `"\u2028\u2029"`, "\"\u2028\u2029\"", "\"\u2028\u2029\""}},
		{"lone surrogate", `"\udc00"`, want{`"\udc00"`, `"\udc00"`, `"\udc00"`, lone, lone}},
		{"key order astral vs BMP", `{"\ufb00":1,"\ud83d\udd12":2}`, want{`{"\ufb00": 1, "\ud83d\udd12": 2}`, `{"\ufb00": 1, "\ud83d\udd12": 2}`, `{"\ufb00":1,"\ud83d\udd12":2}`, `{"🔒":2,"ﬀ":1}`, `{"🔒":2,"ﬀ":1}`}},
		{"key order bytes", `{"b":1,"B":2,"_":3,"a":4,"":5,"aa":6}`, want{`{"": 5, "B": 2, "_": 3, "a": 4, "aa": 6, "b": 1}`, `{"": 5, "B": 2, "_": 3, "a": 4, "aa": 6, "b": 1}`, `{"":5,"B":2,"_":3,"a":4,"aa":6,"b":1}`, `{"":5,"B":2,"_":3,"a":4,"aa":6,"b":1}`, `{"":5,"B":2,"_":3,"a":4,"aa":6,"b":1}`}},
		{"negative zero int", `-0`, want{`0`, `0`, `0`, `0`, `0`}},
		// Integers of up to 15 digits are written as they are; from 16
		// digits JCS rounds them to a double first.
		{"15 digits", `-999999999999999`, want{`-999999999999999`, `-999999999999999`, `-999999999999999`, `-999999999999999`, `-999999999999999`}},
		{"16 digits", `9999999999999999`, want{`9999999999999999`, `9999999999999999`, `9999999999999999`, `10000000000000000`, rng}},
		{"big int", `12345678901234567890`, want{`12345678901234567890`, `12345678901234567890`, `12345678901234567890`, `12345678901234567000`, rng}},
		{"max safe int", `-9007199254740991`, want{`-9007199254740991`, `-9007199254740991`, `-9007199254740991`, `-9007199254740991`, `-9007199254740991`}},
		{"2^53", `9007199254740992`, want{`9007199254740992`, `9007199254740992`, `9007199254740992`, `9007199254740992`, rng}},
		{"float one", `1.0`, want{fl, `1.0`, `1.0`, `1`, fl}},
		{"float exponent int", `1E2`, want{fl, `100.0`, `100.0`, `100`, fl}},
		{"negative zero float", `-0.0`, want{fl, `-0.0`, `-0.0`, `0`, fl}},
		{"repr boundary 1e16", `1e16`, want{fl, `1e+16`, `1e+16`, `10000000000000000`, fl}},
		{"repr boundary 1e15", `1e15`, want{fl, `1000000000000000.0`, `1000000000000000.0`, `1000000000000000`, fl}},
		{"repr boundary 1e-4", `0.0001`, want{fl, `0.0001`, `0.0001`, `0.0001`, fl}},
		{"repr boundary 1e-5", `0.00001`, want{fl, `1e-05`, `1e-05`, `0.00001`, fl}},
		{"es boundary 1e21", `1e21`, want{fl, `1e+21`, `1e+21`, `1e+21`, fl}},
		{"es boundary 1e-7", `1e-7`, want{fl, `1e-07`, `1e-07`, `1e-7`, fl}},
		{"shortest digits", `0.30000000000000004`, want{fl, `0.30000000000000004`, `0.30000000000000004`, `0.30000000000000004`, fl}},
		{"double overflow", `1e400`, want{fl, rng, rng, rng, fl}},
		{"double underflow", `-1e-400`, want{fl, `-0.0`, `-0.0`, `0`, fl}},
		{"python digit limit", "[" + strings.Repeat("7", 4301) + "]", want{rng, rng, rng, rng, rng}},
	} {
		v, err := Parse([]byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.rule, err)
		}
		for _, pc := range []struct {
			p    Profile
			want string
		}{{ChpStableV1, tc.want.stable}, {PythonSortKeys, tc.want.python}, {Genesis, tc.want.genesis}, {JCS, tc.want.jcs}, {ChpJcsV1, tc.want.chpjcs}} {
			got, err := pc.p.AppendCanonical(nil, v)
			var wantErr error
			switch pc.want {
			case fl:
				wantErr = ErrFloat
			case rng:
				wantErr = ErrNumberRange
			case lone:
				wantErr = ErrLoneSurrogate
			}
			if wantErr != nil {
				if !errors.Is(err, wantErr) {
					t.Errorf("%s/%s: got %q, %v; want %v", tc.rule, pc.p.Name(), got, err, wantErr)
				}
				continue
			}
			if err != nil || string(got) != pc.want {
				t.Errorf("%s/%s: got %q, %v; want %q", tc.rule, pc.p.Name(), got, err, pc.want)
			}
		}
	}
}

// TestProfileErrorsOnHandBuiltTrees: trees built in Go can hold what Parse
// never returns; profiles refuse them with the JSON path of the problem.
func TestProfileErrorsOnHandBuiltTrees(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    Value
		kind error
		path string
	}{
		{"duplicate keys", obj(Member{"a", num("1")}, Member{"b", obj(Member{"x", num("1")}, Member{"x", num("2")})}), ErrDuplicateKey, `$["b"]`},
		{"bad literal", arr(num("1"), num("01")), ErrInvalidNumber, `$[1]`},
		{"NaN literal", obj(Member{"k", num("NaN")}), ErrInvalidNumber, `$["k"]`},
		{"empty literal", num(""), ErrInvalidNumber, `$`},
		{"invalid UTF-8", arr(strVal("ok"), strVal("a\xffb")), ErrInvalidUTF8, `$[1]`},
		{"invalid UTF-8 key", obj(Member{"\xc3", num("1")}), ErrInvalidUTF8, "$[\"\ufffd\"]"},
		{"bad kind", arr(Value{Kind: 42}), ErrInvalidKind, `$[0]`},
		{"float deep", obj(Member{"a", arr(obj(Member{"score", num("0.5")}))}), ErrFloat, `$["a"][0]["score"]`},
	} {
		for _, p := range []Profile{ChpStableV1, ChpJcsV1} {
			_, err := p.AppendCanonical(nil, tc.v)
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), "at "+tc.path+":") || !strings.Contains(err.Error(), p.Name()) {
				t.Errorf("%s/%s: got %v; want %v at %s", tc.name, p.Name(), err, tc.kind, tc.path)
			}
		}
	}
}

// TestCanonicalDoesNotMutate: sorting happens on an index, never on the
// caller's tree.
func TestCanonicalDoesNotMutate(t *testing.T) {
	v, err := Parse([]byte(`{"z":{"y":1,"x":2},"a":[{"d":1,"c":2}]}`))
	if err != nil {
		t.Fatal(err)
	}
	before, _ := v.AppendJSON(nil)
	for _, name := range []string{"chp-stable-v1", "jcs", "genesis", "chp-jcs-v1", "python-sort-keys"} {
		p, err := ProfileByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.AppendCanonical(nil, v); err != nil {
			t.Fatal(err)
		}
	}
	after, _ := v.AppendJSON(nil)
	if string(before) != string(after) {
		t.Errorf("tree changed: %s → %s", before, after)
	}
}

func TestProfileByName(t *testing.T) {
	for name, want := range map[string]Profile{
		"chp-stable-v1": ChpStableV1, "jcs": JCS, "rfc8785": JCS, "chp-jcs-v1": ChpJcsV1,
		"genesis": Genesis, "python-sort-keys": PythonSortKeys,
	} {
		got, err := ProfileByName(name)
		if err != nil || got != want {
			t.Errorf("ProfileByName(%q) = %v, %v", name, got, err)
		}
	}
	_, err := ProfileByName("chp-stable-v2")
	if err == nil || !strings.Contains(err.Error(), "chp-stable-v1") {
		t.Errorf("unknown name: %v, want an error listing the known names", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a taken name did not panic")
		}
	}()
	Register(&style{name: "jcs"})
}

// TestCanonicalize: Canonicalize parses and canonicalizes, and reports
// duplicate keys.
func TestCanonicalize(t *testing.T) {
	c, err := Canonicalize(JCS, []byte(`{"b":1.50,"a":"é"}`))
	if err != nil || string(c) != `{"a":"é","b":1.5}` {
		t.Errorf("Canonicalize = %s, %v", c, err)
	}
	if _, err := Canonicalize(JCS, []byte(`{"a":1,"a":2}`)); !errors.Is(err, ErrDuplicateKey) {
		t.Errorf("Canonicalize of duplicate keys: %v", err)
	}
}

// TestSHA256DoesNotAllocate pins the hot path of CHP evidence hashing.
func TestSHA256DoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	for _, doc := range [][]byte{sampleDoc, sampleFloatDoc} {
		v, err := Parse(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []Profile{ChpStableV1, Genesis, JCS, ChpJcsV1} {
			if _, err := HashValue(p, v); err != nil {
				continue // floats under a float-free profile
			}
			if n := testing.AllocsPerRun(100, func() { HashValue(p, v) }); n > 0 {
				t.Errorf("HashValue(%s, Value) allocates %.1f times per call", p.Name(), n)
			}
		}
	}
}

func TestValueHelpers(t *testing.T) {
	v, _ := Parse([]byte(`{"a":1,"signatures":[],"b":{"c":"d"}}`))
	if got, ok := v.Get("b"); !ok || got.Kind != Object {
		t.Errorf("Get(b) = %v, %v", got, ok)
	}
	if _, ok := v.Get("zz"); ok {
		t.Error("Get of a missing key reported true")
	}
	if _, ok := num("1").Get("a"); ok {
		t.Error("Get on a number reported true")
	}
	w := v.Without("signatures", "nope")
	if diff := cmp.Diff([]string{"a", "b"}, keys(w)); diff != "" {
		t.Errorf("Without (-want +got):\n%s", diff)
	}
	if len(v.Obj) != 3 {
		t.Error("Without changed its receiver")
	}
	var s struct {
		Meta Value `json:"meta"`
	}
	if err := json.Unmarshal([]byte(`{"meta":{"z":1.50,"a":[1E2]}}`), &s); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(s)
	if err != nil || string(out) != `{"meta":{"z":1.50,"a":[1E2]}}` {
		t.Errorf("Value in a struct round trip: %s, %v", out, err)
	}
	if err := json.Unmarshal([]byte(`{"meta":{"a":1,"a":2}}`), &s); !errors.Is(err, ErrDuplicateKey) {
		t.Errorf("UnmarshalJSON with duplicate keys: %v", err)
	}
	for k, want := range map[Kind]string{Null: "null", Bool: "bool", Number: "number", String: "string", Array: "array", Object: "object", 9: "Kind(9)"} {
		if k.String() != want {
			t.Errorf("Kind(%d).String() = %q", k, k.String())
		}
	}
}

func keys(v Value) []string {
	var out []string
	for _, m := range v.Obj {
		out = append(out, m.Key)
	}
	return out
}
