package merkle

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestJSONForm pins the JSON form of a head and both proofs byte for byte
// and their round trip, also inside a larger document.
func TestJSONForm(t *testing.T) {
	key := testKey(t, 1)
	tree, _ := rfcTree(t)
	head, _ := tree.SignHead(key, 8, testTime)
	incl, _ := tree.InclusionProof(2, 3)
	cons, _ := tree.ConsistencyProof(2, 5)
	empty, _ := tree.ConsistencyProof(4, 4)

	for _, c := range []struct {
		v    json.Marshaler
		want string
	}{
		{head, `{"tree_size":8,"timestamp":1795748400123,"root_hash":"5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328","key_id":"` + key.Public().KeyID() + `","signature":"` + hex.EncodeToString(head.Signature) + `"}`},
		{incl, `{"leaf_index":2,"tree_size":3,"inclusion_path":["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]}`},
		{cons, `{"tree_size_1":2,"tree_size_2":5,"consistency_path":["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e","bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]}`},
		{empty, `{"tree_size_1":4,"tree_size_2":4,"consistency_path":[]}`},
	} {
		got, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("JSON = %s\nwant   %s", got, c.want)
		}
	}

	type doc struct {
		Head        SignedTreeHead   `json:"head"`
		Inclusion   InclusionProof   `json:"inclusion"`
		Consistency ConsistencyProof `json:"consistency"`
	}
	in := doc{head, incl, cons}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out doc
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip:\n%+v\n%+v", in, out)
	}
	if err := out.Head.Verify(key.Public()); err != nil {
		t.Errorf("parsed head: %v", err)
	}
}

// TestJSONStrict pins what the strict parser refuses, each as ErrMalformed.
func TestJSONStrict(t *testing.T) {
	h64 := strings.Repeat("ab", 32)
	path := `["` + h64 + `"]`
	okIncl := `{"leaf_index":1,"tree_size":2,"inclusion_path":` + path + `}`
	okCons := `{"tree_size_1":1,"tree_size_2":2,"consistency_path":` + path + `}`
	okHead := `{"tree_size":1,"timestamp":2,"root_hash":"` + h64 + `","key_id":"0123456789abcdef","signature":"` + strings.Repeat("cd", 64) + `"}`
	for _, s := range []string{okIncl, okCons, okHead, " \n" + okIncl + "\n ",
		`{"inclusion_path":[],"tree_size":9007199254740991,"leaf_index":0}`} {
		if err := parseAny(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	long := make([]string, MaxPathLen+1)
	for i := range long {
		long[i] = `"` + h64 + `"`
	}
	for _, s := range []string{
		``, `null`, `[]`, `{}`, `"x"`,
		okIncl + `{}`, okIncl + `x`, okIncl[:len(okIncl)-1],
		`{"leaf_index":1,"leaf_index":1,"tree_size":2,"inclusion_path":[]}`,
		`{"leaf_index":1,"tree_size":2,"inclusion_path":[],"extra":0}`,
		`{"tree_size":2,"inclusion_path":[]}`,
		`{"leaf_index":null,"tree_size":2,"inclusion_path":[]}`,
		`{"leaf_index":1,"tree_size":2,"inclusion_path":null}`,
		`{"leaf_index":-1,"tree_size":2,"inclusion_path":[]}`,
		`{"leaf_index":1.0,"tree_size":2,"inclusion_path":[]}`,
		`{"leaf_index":1e0,"tree_size":2,"inclusion_path":[]}`,
		`{"leaf_index":"1","tree_size":2,"inclusion_path":[]}`,
		`{"leaf_index":1,"tree_size":9007199254740992,"inclusion_path":[]}`,
		`{"leaf_index":1,"tree_size":18446744073709551616,"inclusion_path":[]}`,
		`{"leaf_index":1,"tree_size":2,"inclusion_path":["` + strings.ToUpper(h64) + `"]}`,
		`{"leaf_index":1,"tree_size":2,"inclusion_path":["` + h64[2:] + `"]}`,
		`{"leaf_index":1,"tree_size":2,"inclusion_path":["` + h64 + `00"]}`,
		`{"leaf_index":1,"tree_size":2,"inclusion_path":[1]}`,
		`{"leaf_index":1,"tree_size":2,"inclusion_path":[["` + h64 + `"]]}`,
		`{"leaf_index":1,"tree_size":2,"inclusion_path":[` + strings.Join(long, ",") + `]}`,
		`{"tree_size_1":1,"tree_size_2":2,"inclusion_path":[]}`,
		strings.Replace(okHead, `"0123456789abcdef"`, `"0123456789ABCDEF"`, 1),
		strings.Replace(okHead, `"0123456789abcdef"`, `"0123456789abcde"`, 1),
		strings.Replace(okHead, strings.Repeat("cd", 64), strings.Repeat("cd", 63), 1),
		strings.Replace(okHead, `"timestamp":2`, `"timestamp":true`, 1),
		`{"tree_size":1,"timestamp":2,"root_hash":"` + h64 + `","key_id":"0123456789abcdef"}`,
		`{"leaf_index":1,"tree_size":2,"inclusion_path":[],"pad":"` + strings.Repeat("x", MaxJSONSize) + `"}`,
	} {
		if err := parseAny(s); !errors.Is(err, ErrMalformed) {
			t.Errorf("%.120s: err = %v, want ErrMalformed", s, err)
		}
	}
}

// parseAny parses s with the parser its first field names, or with all
// three (failing if any accepts) when it names none.
func parseAny(s string) error {
	switch {
	case strings.Contains(s, `"leaf_index"`):
		_, err := ParseInclusionProof([]byte(s))
		return err
	case strings.Contains(s, `"tree_size_1"`):
		_, err := ParseConsistencyProof([]byte(s))
		return err
	case strings.Contains(s, `"timestamp"`):
		_, err := ParseSignedTreeHead([]byte(s))
		return err
	}
	if _, err := ParseInclusionProof([]byte(s)); err == nil {
		return nil
	}
	if _, err := ParseConsistencyProof([]byte(s)); err == nil {
		return nil
	}
	_, err := ParseSignedTreeHead([]byte(s))
	return err
}

// FuzzParseJSON feeds arbitrary bytes to the three parsers. None may panic;
// whatever one accepts must marshal to a form that parses back to the same
// value and marshals to the same bytes (one canonical spelling).
func FuzzParseJSON(f *testing.F) {
	f.Add([]byte(`{"leaf_index":1,"tree_size":2,"inclusion_path":["` + strings.Repeat("ab", 32) + `"]}`))
	f.Add([]byte(`{"tree_size_1":1,"tree_size_2":2,"consistency_path":[]}`))
	f.Add([]byte(`{"tree_size":1,"timestamp":2,"root_hash":"` + strings.Repeat("ab", 32) + `","key_id":"0123456789abcdef","signature":"` + strings.Repeat("cd", 64) + `"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		roundTrip(t, data, ParseInclusionProof)
		roundTrip(t, data, ParseConsistencyProof)
		roundTrip(t, data, ParseSignedTreeHead)
	})
}

func roundTrip[T json.Marshaler](t *testing.T, data []byte, parse func([]byte) (T, error)) {
	v, err := parse(data)
	if err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v is not ErrMalformed", err)
		}
		return
	}
	b, err := v.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	w, err := parse(b)
	if err != nil {
		t.Fatalf("%s parsed but its marshalled form %s does not: %v", data, b, err)
	}
	if !reflect.DeepEqual(v, w) {
		t.Fatalf("round trip changed %+v to %+v", v, w)
	}
	if b2, _ := w.MarshalJSON(); string(b2) != string(b) {
		t.Fatalf("marshalled twice: %s then %s", b, b2)
	}
}
