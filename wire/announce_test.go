package wire

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/capmesh/capmesh/identity"
)

type saVector struct {
	Name              string   `json:"name"`
	Primal            string   `json:"primal"`
	NodeID            string   `json:"node_id"`
	Version           string   `json:"version"`
	MethodsAsSent     []string `json:"methods_as_sent"`
	RawMessage        *string  `json:"raw_message"`
	SeedHex           string   `json:"seed_hex"`
	PublicKeyHex      string   `json:"public_key_hex"`
	PublicKeyBase64   string   `json:"public_key_base64"`
	CanonicalPreimage string   `json:"canonical_preimage"`
	DigestHex         string   `json:"canonical_digest_sha256_hex"`
	SignatureHex      string   `json:"signature_hex"`
	SignatureBase64   string   `json:"signature_base64"`
	NonCanonical      struct {
		DigestUnsorted     string `json:"digest_unsorted_methods_hex"`
		DigestNoTrailing   string `json:"digest_without_trailing_comma_hex"`
		SigNoTrailing      string `json:"sig_over_digest_without_trailing_comma_hex"`
		SigOverRawPreimage string `json:"sig_over_raw_preimage_not_digest_hex"`
	} `json:"non_canonical_variants"`
}

func loadVectors(t *testing.T) []saVector {
	t.Helper()
	var f struct {
		Vectors []saVector `json:"vectors"`
	}
	if err := json.Unmarshal(ecoFile(t, "signed-announcement-vectors.json"), &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) < 7 {
		t.Fatalf("%d vectors, want at least 7", len(f.Vectors))
	}
	return f.Vectors
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAnnouncementVectors runs every positive vector in both encodings, and
// checks that signing with the vector's key reproduces its signature byte
// for byte (Ed25519 is deterministic).
func TestAnnouncementVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		if v.MethodsAsSent == nil && v.RawMessage != nil {
			continue // the raw-message vector is checked in TestAnnouncementNegativeVectors
		}
		t.Run(v.Name, func(t *testing.T) {
			if got := sha256.Sum256([]byte("primal-identity-key:" + v.Primal + ":" + v.NodeID)); hex.EncodeToString(got[:]) != v.SeedHex {
				t.Fatalf("seed of the vector is not the ecoPrimals derivation")
			}
			key := identity.DeriveEcoPrimalsCompat(v.Primal, v.NodeID)
			if got := key.Public().Hex(); got != v.PublicKeyHex {
				t.Fatalf("public key %s, want %s", got, v.PublicKeyHex)
			}
			d := AnnouncementMessage(v.Primal, v.Version, v.MethodsAsSent)
			if got := hex.EncodeToString(d[:]); got != v.DigestHex {
				t.Errorf("AnnouncementMessage = %s, want %s", got, v.DigestHex)
			}
			if want := sha256.Sum256([]byte(v.CanonicalPreimage)); want != d {
				t.Errorf("digest is not SHA-256 of the preimage %q", v.CanonicalPreimage)
			}
			sa := SignAnnouncement(key, v.Primal, v.Version, v.MethodsAsSent)
			want := SignedAnnouncement{
				SchemaVersion: 2, Algorithm: "ed25519",
				PublicKey: v.PublicKeyHex, Signature: v.SignatureHex,
				SignedFields: []string{"primal", "version", "methods"},
			}
			if diff := cmp.Diff(want, sa); diff != "" {
				t.Errorf("SignAnnouncement (-want +got):\n%s", diff)
			}
			for _, enc := range []struct {
				name, pub, sig string
			}{
				{"hex", v.PublicKeyHex, v.SignatureHex},
				{"hex", strings.ToUpper(v.PublicKeyHex), strings.ToUpper(v.SignatureHex)},
				{"base64", v.PublicKeyBase64, v.SignatureBase64},
				{"base64", strings.TrimRight(toURL(v.PublicKeyBase64), "="), strings.TrimRight(toURL(v.SignatureBase64), "=")},
				{"base64", toURL(v.PublicKeyBase64), toURL(v.SignatureBase64)},
			} {
				a := want
				a.PublicKey, a.Signature = enc.pub, enc.sig
				got, err := VerifyAnnouncement(a, v.Primal, v.Version, v.MethodsAsSent)
				if err != nil {
					t.Errorf("%s: VerifyAnnouncement: %v", enc.name, err)
					continue
				}
				if got.Encoding != enc.name || !got.MethodsCovered || got.PublicKey.Hex() != v.PublicKeyHex {
					t.Errorf("%s: got %+v", enc.name, got)
				}
				if !got.PublicKey.IsEcoPrimalsDerived(v.Primal, v.NodeID) {
					t.Errorf("key not recognised as derived from (%s, %s)", v.Primal, v.NodeID)
				}
				if got.PublicKey.IsEcoPrimalsDerived(v.Primal, v.NodeID+"x") {
					t.Error("key recognised as derived from another node id")
				}
			}
		})
	}
}

func toURL(std string) string {
	return strings.NewReplacer("+", "-", "/", "_").Replace(std)
}

// TestAnnouncementNegativeVectors: the signatures made by the common
// mistakes (no trailing comma, unsorted methods, signing the raw pre-image)
// must be refused, and so must any change to primal, version or methods.
func TestAnnouncementNegativeVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			good := SignedAnnouncement{SchemaVersion: 2, Algorithm: "ed25519", PublicKey: v.PublicKeyHex, Signature: v.SignatureHex, SignedFields: []string{"primal", "version", "methods"}}
			if v.RawMessage != nil {
				// bearDog's sign_with_primal_identity signs raw bytes: the
				// vector verifies as plain Ed25519, never as an announcement.
				if !ed25519.Verify(mustHex(t, v.PublicKeyHex), []byte(*v.RawMessage), mustHex(t, v.SignatureHex)) {
					t.Fatal("raw vector does not verify as plain Ed25519")
				}
				if _, err := VerifyAnnouncement(good, v.Primal, v.Version, nil); !errors.Is(err, ErrAnnouncementSignature) {
					t.Errorf("raw-message signature accepted as an announcement: %v", err)
				}
				return
			}
			d := AnnouncementMessage(v.Primal, v.Version, v.MethodsAsSent)
			dh := hex.EncodeToString(d[:])
			if v.NonCanonical.DigestNoTrailing != dh && v.NonCanonical.DigestNoTrailing == "" {
				t.Fatal("vector lacks non-canonical variants")
			}
			for name, sig := range map[string]string{
				"no trailing comma": v.NonCanonical.SigNoTrailing,
				"raw pre-image":     v.NonCanonical.SigOverRawPreimage,
			} {
				if sig == v.SignatureHex {
					// neural_attestation_empty_methods: with no methods there
					// is no trailing comma to forget; the variant equals the
					// canonical signature.
					continue
				}
				bad := good
				bad.Signature = sig
				if _, err := VerifyAnnouncement(bad, v.Primal, v.Version, v.MethodsAsSent); !errors.Is(err, ErrAnnouncementSignature) {
					t.Errorf("%s: signature accepted (err %v)", name, err)
				}
			}
			if v.NonCanonical.DigestUnsorted != dh {
				// The canonical digest must not be the unsorted one (the
				// two coincide only when the methods came sorted).
				var unsorted []byte
				unsorted = append(unsorted, v.Primal+":"+v.Version+":"...)
				for _, m := range v.MethodsAsSent {
					unsorted = append(unsorted, m+","...)
				}
				if got := sha256.Sum256(unsorted); hex.EncodeToString(got[:]) != v.NonCanonical.DigestUnsorted {
					t.Errorf("vector's unsorted digest does not match our reconstruction")
				}
			}
			if v.NonCanonical.DigestNoTrailing == dh && len(v.MethodsAsSent) > 0 {
				t.Error("canonical digest equals the no-trailing-comma digest")
			}
			changes := map[string]func() (string, string, []string){
				"primal":  func() (string, string, []string) { return v.Primal + "x", v.Version, v.MethodsAsSent },
				"version": func() (string, string, []string) { return v.Primal, v.Version + ".1", v.MethodsAsSent },
				"added method": func() (string, string, []string) {
					return v.Primal, v.Version, append(append([]string{}, v.MethodsAsSent...), "evil.method")
				},
				"colon shifted": func() (string, string, []string) { return v.Primal + ":" + v.Version, "", v.MethodsAsSent },
			}
			if len(v.MethodsAsSent) > 0 {
				changes["dropped method"] = func() (string, string, []string) { return v.Primal, v.Version, v.MethodsAsSent[1:] }
			}
			for name, f := range changes {
				p, ver, ms := f()
				if _, err := VerifyAnnouncement(good, p, ver, ms); !errors.Is(err, ErrAnnouncementSignature) {
					t.Errorf("%s: accepted (err %v)", name, err)
				}
			}
		})
	}
}

// TestAnnouncementSignedFields: the neural-registration shape signs only
// primal and version; the methods are then not attested.
func TestAnnouncementSignedFields(t *testing.T) {
	var v saVector
	for _, x := range loadVectors(t) {
		if x.Name == "neural_attestation_empty_methods" {
			v = x
		}
	}
	if v.Name == "" {
		t.Fatal("vector neural_attestation_empty_methods missing")
	}
	a := SignedAnnouncement{SchemaVersion: 2, Algorithm: "ed25519", PublicKey: v.PublicKeyBase64, Signature: v.SignatureBase64, SignedFields: []string{"primal", "version"}}
	got, err := VerifyAnnouncement(a, v.Primal, v.Version, []string{"crypto.sign", "any.thing"})
	if err != nil {
		t.Fatal(err)
	}
	if got.MethodsCovered {
		t.Error("MethodsCovered true although signed_fields leaves out methods")
	}
	a.SignedFields = []string{"primal", "version", "methods"}
	if _, err := VerifyAnnouncement(a, v.Primal, v.Version, []string{"crypto.sign"}); !errors.Is(err, ErrAnnouncementSignature) {
		t.Errorf("methods claimed as signed but not: err %v", err)
	}
	// Each of primal and version is required on its own.
	for _, fields := range [][]string{{"methods"}, {"primal", "methods"}, {"primal"}, {"version", "methods"}, {"version"}} {
		a.SignedFields = fields
		if _, err := VerifyAnnouncement(a, v.Primal, v.Version, nil); !errors.Is(err, ErrAnnouncementFormat) {
			t.Errorf("signed_fields %q accepted: err %v", fields, err)
		}
	}
}

func TestAnnouncementMalformed(t *testing.T) {
	key, err := identity.NewKeyFromSeed(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	good := SignAnnouncement(key, "p", "1.0.0", []string{"a.b"})
	b64 := func(h string) string { b, _ := hex.DecodeString(h); return base64.StdEncoding.EncodeToString(b) }
	tests := map[string]func(a *SignedAnnouncement){
		"schema 1":            func(a *SignedAnnouncement) { a.SchemaVersion = 1 },
		"schema 3":            func(a *SignedAnnouncement) { a.SchemaVersion = 3 },
		"algorithm":           func(a *SignedAnnouncement) { a.Algorithm = "ecdsa-p256" },
		"short key":           func(a *SignedAnnouncement) { a.PublicKey = a.PublicKey[:62] },
		"long key":            func(a *SignedAnnouncement) { a.PublicKey += "00" },
		"key not hex":         func(a *SignedAnnouncement) { a.PublicKey = "zz" + a.PublicKey[2:] },
		"empty signature":     func(a *SignedAnnouncement) { a.Signature = "" },
		"signature not b64":   func(a *SignedAnnouncement) { a.Signature = strings.Repeat("!", 88) },
		"mixed encodings":     func(a *SignedAnnouncement) { a.Signature = b64(a.Signature) },
		"b64 with whitespace": func(a *SignedAnnouncement) { a.PublicKey = b64(a.PublicKey)[:20] + " " + b64(a.PublicKey)[21:] },
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			a := good
			mutate(&a)
			if _, err := VerifyAnnouncement(a, "p", "1.0.0", []string{"a.b"}); !errors.Is(err, ErrAnnouncementFormat) {
				t.Errorf("err = %v, want ErrAnnouncementFormat", err)
			}
		})
	}
	if _, err := VerifyAnnouncement(good, "p", "1.0.0", []string{"a.b"}); err != nil {
		t.Fatalf("good announcement: %v", err)
	}
	up := good
	up.Algorithm = "Ed25519"
	if _, err := VerifyAnnouncement(up, "p", "1.0.0", []string{"a.b"}); err != nil {
		t.Errorf("algorithm case: %v", err)
	}
}

// smallOrderKeys are encodings of the points of order dividing 8 on
// edwards25519 (and the x = -0 spellings of the two with x = 0).
var smallOrderKeys = []string{
	"0100000000000000000000000000000000000000000000000000000000000000",
	"0100000000000000000000000000000000000000000000000000000000000080",
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
	"0000000000000000000000000000000000000000000000000000000000000000",
	"0000000000000000000000000000000000000000000000000000000000000080",
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
}

// TestAnnouncementSmallOrderKeys: under each small-order key,
// crypto/ed25519 accepts a forgery of our making for some message, and
// VerifyAnnouncement refuses it.
func TestAnnouncementSmallOrderKeys(t *testing.T) {
	for i, h := range smallOrderKeys {
		pub := mustHex(t, h)
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			// With A of small order and S = 0, the check [S]B = R + [k]A
			// holds whenever R = -[k]A; trying the small-order points as R
			// over a few messages finds such a forgery quickly.
			forged := false
			for n := 0; n < 64 && !forged; n++ {
				msg := AnnouncementMessage("p", fmt.Sprint(n), nil)
				for _, rh := range smallOrderKeys {
					sig := append(mustHex(t, rh), make([]byte, 32)...)
					if ed25519.Verify(ed25519.PublicKey(pub), msg[:], sig) {
						forged = true
						a := SignedAnnouncement{SchemaVersion: 2, Algorithm: "ed25519", PublicKey: h, Signature: hex.EncodeToString(sig)}
						if _, err := VerifyAnnouncement(a, "p", fmt.Sprint(n), nil); !errors.Is(err, ErrAnnouncementSignature) {
							t.Errorf("forgery under a small-order key accepted: %v", err)
						}
						break
					}
				}
			}
			if !forged {
				t.Errorf("key %s: no forgery found; is it really of small order?", h)
			}
		})
	}
}

// FuzzVerifyAnnouncement: arbitrary announcements never panic, and only
// return the package's two error kinds.
func FuzzVerifyAnnouncement(f *testing.F) {
	f.Add(2, "ed25519", "250977d14761f1efdea76a0f65a76d8f6e14f4c50f0175fbb584c1718f694a0c", "c65e0aca28711c6f5cfa6d8b29f9c910966ade7bec82f7987ff596bd77a094b56904b4096bb40426fd735ae28a8fe0826cbf731f2d2ed2bb54109f634f601a02", "beardog", "0.9.0", "health.liveness,identity.get,crypto.sign_ed25519,capabilities.list")
	f.Add(2, "ed25519", "JQl30Udh8e/ep2oPZadtj24U9MUPAXX7tYTBcY9pSgw=", "xl4KyihxHG9c+m2LKfnJEJZq3nvsgveYf/WWvXeglLVpBLQJa7QEJv1zWuKKj+CCbL9zHy0u0rtUEJ9jT2AaAg==", "beardog", "0.9.0", "")
	f.Fuzz(func(t *testing.T, schema int, alg, pub, sig, primal, version, methods string) {
		var ms []string
		if methods != "" {
			ms = strings.Split(methods, ",")
		}
		a := SignedAnnouncement{SchemaVersion: schema, Algorithm: alg, PublicKey: pub, Signature: sig, SignedFields: []string{"primal", "version", "methods"}}
		_, err := VerifyAnnouncement(a, primal, version, ms)
		if err != nil && !errors.Is(err, ErrAnnouncementFormat) && !errors.Is(err, ErrAnnouncementSignature) {
			t.Fatalf("unexpected error kind: %v", err)
		}
	})
}
