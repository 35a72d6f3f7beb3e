package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

type announcementVector struct {
	Name             string   `json:"name"`
	Primal           string   `json:"primal"`
	NodeID           string   `json:"node_id"`
	Version          string   `json:"version"`
	Methods          []string `json:"methods_as_sent"`
	SeedHex          string   `json:"seed_hex"`
	PublicKeyHex     string   `json:"public_key_hex"`
	PublicKeyBase64  string   `json:"public_key_base64"`
	SignedBytesHex   string   `json:"signed_bytes_hex"`
	SignatureHex     string   `json:"signature_hex"`
	SignatureBase64  string   `json:"signature_base64"`
	RawMessage       *string  `json:"raw_message"`
	NonCanonicalSigs struct {
		NoTrailingComma string `json:"sig_over_digest_without_trailing_comma_hex"`
		RawPreimage     string `json:"sig_over_raw_preimage_not_digest_hex"`
	} `json:"non_canonical_variants"`
}

func loadAnnouncementVectors(t *testing.T) []announcementVector {
	t.Helper()
	data, err := os.ReadFile("testdata/signed-announcement-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Vectors []announcementVector }
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Vectors) < 7 {
		t.Fatalf("only %d vectors", len(doc.Vectors))
	}
	return doc.Vectors
}

// TestEcoPrimalsVectors: the compat derivation reproduces every ecoPrimals
// signed-announcement vector (seed, key in both encodings, signature), the
// signatures verify in hex and base64 form, and the signatures made by the
// common mistakes do not.
func TestEcoPrimalsVectors(t *testing.T) {
	for _, v := range loadAnnouncementVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			seed := ecoPrimalsSeed(v.Primal, v.NodeID)
			if got := hex.EncodeToString(seed[:]); got != v.SeedHex {
				t.Fatalf("seed %s, want %s", got, v.SeedHex)
			}
			k := DeriveEcoPrimalsCompat(v.Primal, v.NodeID)
			if !k.IsDerived() {
				t.Error("derived key does not say so")
			}
			if k.Public().Hex() != v.PublicKeyHex || k.Public().Base64() != v.PublicKeyBase64 {
				t.Fatalf("public key %s / %s, want %s / %s", k.Public().Hex(), k.Public().Base64(), v.PublicKeyHex, v.PublicKeyBase64)
			}
			// The signed bytes: SHA-256 of primal:version:m1,m2,... (sorted
			// bytewise, trailing comma after each), or a raw message.
			var signed []byte
			if v.RawMessage != nil {
				signed = []byte(*v.RawMessage)
			} else {
				methods := slices.Clone(v.Methods)
				slices.Sort(methods)
				var b strings.Builder
				b.WriteString(v.Primal + ":" + v.Version + ":")
				for _, m := range methods {
					b.WriteString(m + ",")
				}
				sum := sha256.Sum256([]byte(b.String()))
				signed = sum[:]
			}
			if got := hex.EncodeToString(signed); got != v.SignedBytesHex {
				t.Fatalf("signed bytes %s, want %s", got, v.SignedBytesHex)
			}
			if got := hex.EncodeToString(k.Sign(signed)); got != v.SignatureHex {
				t.Errorf("signature %s, want %s", got, v.SignatureHex)
			}
			for _, enc := range []struct{ pub, sig string }{{v.PublicKeyHex, v.SignatureHex}, {v.PublicKeyBase64, v.SignatureBase64}} {
				pub, err := ParsePublicKeyString(enc.pub)
				if err != nil {
					t.Fatal(err)
				}
				sig, _, err := DecodeAny(enc.sig, 64)
				if err != nil {
					t.Fatal(err)
				}
				if err := pub.Verify(signed, sig); err != nil {
					t.Errorf("Verify(%s…): %v", enc.sig[:8], err)
				}
			}
			for name, bad := range map[string]string{"no trailing comma": v.NonCanonicalSigs.NoTrailingComma, "raw preimage": v.NonCanonicalSigs.RawPreimage} {
				if bad == "" || bad == v.SignatureHex {
					continue // empty-methods vectors: the "mistake" is the same message
				}
				if err := k.Public().Verify(signed, mustHex(t, bad)); !errors.Is(err, ErrSignatureMismatch) {
					t.Errorf("%s signature: %v, want ErrSignatureMismatch", name, err)
				}
			}
			if !k.Public().IsEcoPrimalsDerived(v.Primal, v.NodeID) {
				t.Error("IsEcoPrimalsDerived is false for its own (name, node)")
			}
			if k.Public().IsEcoPrimalsDerived(v.Primal, v.NodeID+"x") || k.Public().IsEcoPrimalsDerived(v.Primal+":"+v.NodeID, "") {
				t.Error("IsEcoPrimalsDerived is true for another (name, node)")
			}
		})
	}
	g, _ := Generate()
	if g.IsDerived() {
		t.Error("a random key claims to be derived")
	}
}
