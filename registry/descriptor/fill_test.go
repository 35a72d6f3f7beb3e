package descriptor_test

import (
	"bytes"
	"testing"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/registry/descriptor"
)

const fillKey = "O2onvM62pC1io6jQKm8Nc2UyFXcd4kOmOsBIoYtZ2ik="

func TestWithNodeKey(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		// Missing: appended; literals, escapes and order kept.
		{`{"m": {"f": 1.0, "b": 12345678901234567890, "s": "\ud800"}, "p": 8443.0}`,
			`{"m":{"f":1.0,"b":12345678901234567890,"s":"\ud800"},"p":8443.0,"node_public_key":"` + fillKey + `"}`},
		// Null: replaced in place.
		{`{"a": 1e2, "node_public_key": null, "z": -0}`, `{"a":1e2,"node_public_key":"` + fillKey + `","z":-0}`},
		// Present: unchanged, byte for byte.
		{`{"node_public_key": "other" , "a": 1.50}`, `{"node_public_key": "other" , "a": 1.50}`},
	} {
		got, err := descriptor.WithNodeKey([]byte(tt.in), fillKey)
		if err != nil || string(got) != tt.want {
			t.Errorf("WithNodeKey(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{`[]`, `{"a":1,"a":2}`, `{`, `"node_public_key"`} {
		if _, err := descriptor.WithNodeKey([]byte(bad), fillKey); code(err) == "" {
			t.Errorf("WithNodeKey(%s): %v, want a coded refusal", bad, err)
		}
	}
}

// FuzzWithNodeKey: on any input WithNodeKey refuses with a code or returns
// a document with node_public_key set and every other member unchanged,
// literal for literal and in order.
func FuzzWithNodeKey(f *testing.F) {
	for _, s := range loadSamples(f) {
		f.Add([]byte(s.Descriptor))
	}
	f.Add([]byte(`{"agent_id":"a","network_name":"n","endpoint":{"host":"h","port":8443.0},"metadata":{"f":1.0,"b":12345678901234567890,"s":"\ud800"}}`))
	f.Add([]byte(`{"node_public_key":null,"x":[1E+2,-0.0,"\udfff"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := descriptor.WithNodeKey(data, fillKey)
		if err != nil {
			if code(err) == "" {
				t.Fatalf("error without a code: %v", err)
			}
			return
		}
		in, err := canonical.Parse(data)
		if err != nil {
			t.Fatalf("accepted what canonical.Parse refuses: %v", err)
		}
		got, err := canonical.Parse(out)
		if err != nil {
			t.Fatalf("output does not parse: %v\n%s", err, out)
		}
		if k, ok := got.Get("node_public_key"); !ok || k.Kind != canonical.String {
			t.Fatalf("node_public_key not set: %s", out)
		}
		a, _ := in.Without("node_public_key").AppendJSON(nil)
		b, _ := got.Without("node_public_key").AppendJSON(nil)
		if !bytes.Equal(a, b) {
			t.Fatalf("members changed:\nin  %s\nout %s", a, b)
		}
		if k, _ := in.Get("node_public_key"); k.Kind == canonical.String && !bytes.Equal(out, data) {
			t.Fatalf("a document with a key was rewritten")
		}
	})
}
