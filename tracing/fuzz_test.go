package tracing_test

import (
	"testing"

	"github.com/capmesh/capmesh/tracing"
)

// FuzzParseTraceparent: any string parses or fails cleanly; what parses
// prints back as a version-00 traceparent that parses to the same ids.
func FuzzParseTraceparent(f *testing.F) {
	f.Add(tp)
	f.Add("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x")
	f.Fuzz(func(t *testing.T, s string) {
		sc, err := tracing.ParseTraceparent(s)
		if err != nil {
			return
		}
		back, err := tracing.ParseTraceparent(sc.Traceparent())
		if err != nil || back != sc {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, sc, sc.Traceparent(), back, err)
		}
	})
}

// FuzzFromMeta: any params are read without panicking, and a span
// context found is valid.
func FuzzFromMeta(f *testing.F) {
	f.Add([]byte(`{"_meta":{"traceparent":"` + tp + `"}}`))
	f.Add([]byte(`{"_meta":{"traceparent":null},"traceparent":1}`))
	f.Fuzz(func(t *testing.T, params []byte) {
		if sc, ok := tracing.FromMeta(params); ok && !sc.IsValid() {
			t.Fatalf("FromMeta(%q) = invalid %+v", params, sc)
		}
	})
}
