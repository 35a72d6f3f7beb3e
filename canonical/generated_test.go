package canonical

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// The cases under testdata/python and testdata/es were written by CPython's
// json.dumps and by Node (JSON.parse, Number.prototype.toString, UTF-16 key
// sort) from the same 807 JSON texts; see testdata/gen. A null expectation
// means the reference cannot write JSON for the input.

type genCase struct {
	name, input string
	want        *string
}

func loadCases(t *testing.T, file, field string) []genCase {
	t.Helper()
	doc := readTree(t, file)
	var out []genCase
	for _, c := range doc.Obj[indexOf(t, doc, "cases")].Value.Arr {
		gc := genCase{name: str(t, c, "name"), input: str(t, c, "input")}
		if w, ok := c.Get(field); ok && w.Kind == String {
			s := w.Str
			gc.want = &s
		}
		out = append(out, gc)
	}
	if len(out) < 800 {
		t.Fatalf("%s: only %d cases", file, len(out))
	}
	return out
}

func indexOf(t *testing.T, v Value, key string) int {
	t.Helper()
	for i, m := range v.Obj {
		if m.Key == key {
			return i
		}
	}
	t.Fatalf("no member %q", key)
	return -1
}

// walkNumbers calls f with every number literal in v.
func walkNumbers(v Value, f func(lit string)) {
	switch v.Kind {
	case Number:
		f(v.Str)
	case Array:
		for _, x := range v.Arr {
			walkNumbers(x, f)
		}
	case Object:
		for _, m := range v.Obj {
			walkNumbers(m.Value, f)
		}
	}
}

func hasFloat(v Value) (found bool) {
	walkNumbers(v, func(lit string) { found = found || strings.ContainsAny(lit, ".eE") })
	return found
}

func hasUnsafeInt(v Value) (found bool) {
	walkNumbers(v, func(lit string) {
		d := strings.TrimPrefix(lit, "-")
		found = found || len(d) > 16 || len(d) == 16 && d > maxSafeInteger
	})
	return found
}

// checkCase canonicalizes c.input under p. With wantErrs, any one of them is
// the expected outcome (the first one met in key order wins).
func checkCase(t *testing.T, p Profile, c genCase, wantErrs ...error) {
	t.Helper()
	v, err := Parse([]byte(c.input))
	if err != nil {
		t.Fatalf("%s: Parse: %v", c.name, err)
	}
	got, err := p.AppendCanonical(nil, v)
	switch {
	case len(wantErrs) > 0:
		if !slices.ContainsFunc(wantErrs, func(e error) bool { return errors.Is(err, e) }) {
			t.Errorf("%s %s: got %q, %v; want one of %v", p.Name(), c.name, got, err, wantErrs)
		}
	case c.want == nil:
		if err == nil {
			t.Errorf("%s %s: got %q, want an error (the reference cannot write it)", p.Name(), c.name, got)
		}
	case err != nil:
		t.Errorf("%s %s: %v, want %q", p.Name(), c.name, err, *c.want)
	case string(got) != *c.want:
		t.Errorf("%s %s:\n got %q\nwant %q\n  in %q", p.Name(), c.name, got, *c.want, c.input)
	}
}

func TestPythonGenerated(t *testing.T) {
	for _, c := range loadCases(t, "python/cases.json", "python_sort_keys") {
		checkCase(t, PythonSortKeys, c)
		v, _ := Parse([]byte(c.input))
		if hasFloat(v) {
			checkCase(t, ChpStableV1, c, ErrFloat, ErrNumberRange)
		} else {
			checkCase(t, ChpStableV1, c)
		}
	}
	for _, c := range loadCases(t, "python/cases.json", "genesis") {
		checkCase(t, Genesis, c)
	}
}

func TestESGenerated(t *testing.T) {
	for _, c := range loadCases(t, "es/cases.json", "jcs") {
		checkCase(t, JCS, c)
		v, _ := Parse([]byte(c.input))
		var wantErrs []error
		if hasFloat(v) {
			wantErrs = append(wantErrs, ErrFloat)
		}
		if hasUnsafeInt(v) {
			wantErrs = append(wantErrs, ErrNumberRange)
		}
		if c.want == nil || len(wantErrs) > 0 {
			// Node found no RFC 8785 form: a lone surrogate or an overflow.
			wantErrs = append(wantErrs, ErrLoneSurrogate, ErrNumberRange)
		}
		checkCase(t, ChpJcsV1, c, wantErrs...)
	}
	doc := readTree(t, "es/cases.json")
	doubles := doc.Obj[indexOf(t, doc, "doubles")].Value.Arr
	if len(doubles) < 2000 {
		t.Fatalf("only %d doubles", len(doubles))
	}
	for _, d := range doubles {
		lit, want := str(t, d, "literal"), str(t, d, "es")
		got, err := JCS.AppendCanonical(nil, Value{Kind: Number, Str: lit})
		if err != nil || string(got) != want {
			t.Errorf("JCS(%s) = %q, %v; want %q", lit, got, err, want)
		}
	}
}
