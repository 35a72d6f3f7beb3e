package witnessing

import (
	"encoding/json"
	"errors"
	"testing"
)

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
