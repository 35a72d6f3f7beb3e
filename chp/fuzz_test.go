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
