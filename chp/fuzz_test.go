package chp

import (
	"testing"
)

// FuzzParseEnvelope: any input yields an envelope or ErrBadEnvelope, never a
// panic, and an accepted envelope is normalized.
func FuzzParseEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"capability_id":"conformance.echo","payload":{"value":"x"}}`,
		`{"capability_id":"a","correlation_id":"c","arguments":{"k":1}}`,
		`{"capability_id":"a","correlation":{"correlation_id":"","baggage":{"x":1.5}},"subject":{"id":"u"}}`,
		`{"payload":[1]}`, `[]`, `null`, `{"mode":5}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := ParseEnvelope(data)
		if err != nil {
			return
		}
		if env.InvocationID == "" || env.Correlation.CorrelationID == "" || env.Mode == "" || !isObject(env.Payload) {
			t.Fatalf("accepted envelope not normalized: %+v", env)
		}
	})
}

// FuzzVerifyBundle: the verifier fails closed on any input.
func FuzzVerifyBundle(f *testing.F) {
	f.Add([]byte(`{"host_id":"h","root_hash":"e3b0","events":[],"assurance":"hash-chain"}`))
	f.Add([]byte(`{"host_id":"h","root_hash":"x","events":[{"content_hash":"a","prev_hash":null,"hash_scheme":"chp-event-hash-v2","payload":{"io.github.capmesh.bind":{}}}],"assurance":"signed","signature":{},"public_key":"AAAA"}`))
	f.Add([]byte(`{"events":[1,2],"completeness":{"scheme":"chp-completeness-v1"}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := VerifyBundle(data, nil)
		if err == nil && v.Valid && v.EventCount == 0 && v.Assurance == "signed" {
			t.Fatalf("empty signed bundle verified without a signature check: %+v", v)
		}
	})
}

// plainASCIIByTable is isPlainASCII one byte at a time.
func plainASCIIByTable(s string) bool {
	for i := 0; i < len(s); i++ {
		if !plainASCII[s[i]] {
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
