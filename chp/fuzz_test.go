package chp

import (
	"encoding/json"
	"errors"
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

// FuzzParseChainWitness: any input is a verified statement or an
// ErrInvalidWitness refusal, never a panic; an accepted one re-marshals to
// a statement that still verifies (no member is lost in parsing).
func FuzzParseChainWitness(f *testing.F) {
	f.Add([]byte(`{"kind":"chain-witness","host_id":"h","sequence":1,"store_head":"` + EmptyRevocationHead + `"}`))
	f.Add([]byte(`{"kind":"chain-witness","sequence":1.5}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := ParseChainWitness(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidWitness) {
				t.Fatalf("refusal not ErrInvalidWitness: %v", err)
			}
			return
		}
		again, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseChainWitness(again); err != nil {
			t.Fatalf("accepted statement does not survive a round trip: %v\n%s", err, again)
		}
	})
}

// FuzzParseStoreHeadAnchor: the anchor parser, with its SSHSIG and did:key
// decoders, fails closed on any input.
func FuzzParseStoreHeadAnchor(f *testing.F) {
	f.Add([]byte(`{"kind":"store-head-anchor","host_id":"h","sequence":1,"store_head":"` + EmptyRevocationHead +
		`","anchored_at":"t","anchor":{"type":"did","did":"did:key:z6MkhFwXNFWosLeugvSf4wcL9t3uuRXueGSFTRgSvHhWj5G2","countersignature":"-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n"}}`))
	f.Add([]byte(`{"anchor":{"did":"did:key:z111111"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := ParseStoreHeadAnchor(data); err != nil && !errors.Is(err, ErrInvalidWitness) {
			t.Fatalf("refusal not ErrInvalidWitness: %v", err)
		}
	})
}
