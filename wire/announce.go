package wire

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// AnnouncementSchemaVersion is the canonical message format of signed
// announcements this package emits and verifies (SA-01 schema 2).
const AnnouncementSchemaVersion = 2

// AnnouncementAlgorithm is the only signature algorithm of signed
// announcements.
const AnnouncementAlgorithm = "ed25519"

// SignedAnnouncement is the signed_announcement object of capabilities.list:
// an Ed25519 signature by the host's key over AnnouncementMessage.
type SignedAnnouncement struct {
	// SchemaVersion is the canonical message format, currently 2.
	SchemaVersion int `json:"schema_version"`
	// Algorithm is always "ed25519".
	Algorithm string `json:"algorithm"`
	// PublicKey is the 32-byte verifying key; capmesh emits lowercase hex
	// (the standard) and accepts hex or base64 (what BearDog sends).
	PublicKey string `json:"public_key"`
	// Signature is the 64-byte signature, encoded like PublicKey.
	Signature string `json:"signature"`
	// SignedFields names the response fields the signature covers.
	SignedFields []string `json:"signed_fields"`
}

// AnnouncementMessage returns the 32 bytes that are signed:
//
//	SHA-256(primal ":" version ":" m1 "," m2 "," … mN ",")
//
// with the methods sorted bytewise and duplicates kept; every method is
// followed by a comma, the last one included, and no methods at all gives
// SHA-256(primal ":" version ":"). The caller's slice is not modified.
func AnnouncementMessage(primal, version string, methods []string) [32]byte {
	sorted := slices.Clone(methods)
	slices.Sort(sorted) // Go string order is bytewise, as the standard requires
	h := sha256.New()
	h.Write([]byte(primal))
	h.Write([]byte{':'})
	h.Write([]byte(version))
	h.Write([]byte{':'})
	for _, m := range sorted {
		h.Write([]byte(m))
		h.Write([]byte{','})
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// SignAnnouncement signs primal, version and methods with key, which must be
// an Ed25519 signer (an ed25519.PrivateKey, or any crypto.Signer whose Public
// is an ed25519.PublicKey, such as a key held by the identity package), and
// returns the signed_announcement object with hex encoding and
// signed_fields [primal, version, methods].
func SignAnnouncement(key crypto.Signer, primal, version string, methods []string) (SignedAnnouncement, error) {
	pub, ok := key.Public().(ed25519.PublicKey)
	if !ok || len(pub) != ed25519.PublicKeySize {
		return SignedAnnouncement{}, fmt.Errorf("sign announcement: key is %T, want an Ed25519 key", key.Public())
	}
	msg := AnnouncementMessage(primal, version, methods)
	// crypto.Hash(0) selects pure Ed25519 over the 32-byte digest.
	sig, err := key.Sign(rand.Reader, msg[:], crypto.Hash(0))
	if err != nil {
		return SignedAnnouncement{}, fmt.Errorf("sign announcement: %w", err)
	}
	return SignedAnnouncement{
		SchemaVersion: AnnouncementSchemaVersion,
		Algorithm:     AnnouncementAlgorithm,
		PublicKey:     hex.EncodeToString(pub),
		Signature:     hex.EncodeToString(sig),
		SignedFields:  []string{"primal", "version", "methods"},
	}, nil
}

// Errors returned by VerifyAnnouncement (wrapped; test with errors.Is).
var (
	// ErrAnnouncementSignature means the signature does not verify over
	// the canonical message of the given primal, version and methods.
	ErrAnnouncementSignature = errors.New("signed announcement: signature does not verify")
	// ErrAnnouncementFormat means the object is malformed or of a schema or
	// algorithm this package does not know.
	ErrAnnouncementFormat = errors.New("signed announcement: malformed")
)

// VerifiedAnnouncement describes a signed announcement that verified.
type VerifiedAnnouncement struct {
	// PublicKey is the key that signed.
	PublicKey ed25519.PublicKey
	// Encoding is how public_key and signature were written: "hex" or
	// "base64" (either alphabet, padded or not).
	Encoding string
	// MethodsCovered is false when signed_fields leaves out "methods": the
	// signature then covers only primal and version (the message is
	// computed over an empty method list), and the advertised methods are
	// not attested.
	MethodsCovered bool
}

// VerifyAnnouncement checks a signed_announcement against the primal,
// version and methods of the response it came with. It accepts public_key
// and signature in hex (the standard) or base64 (standard or URL alphabet,
// padded or not — BearDog sends padded standard base64), requires
// schema_version 2 and algorithm ed25519, and refuses a signed_fields list
// that does not cover primal and version. If signed_fields omits "methods",
// the signature is checked over an empty method list and MethodsCovered is
// false.
//
// Verification is strict: a signature with a non-canonical S, a public key
// of small order or a non-canonical key encoding is rejected, so one key
// cannot be made to accept a message it did not sign.
func VerifyAnnouncement(a SignedAnnouncement, primal, version string, methods []string) (VerifiedAnnouncement, error) {
	if a.SchemaVersion != AnnouncementSchemaVersion {
		return VerifiedAnnouncement{}, fmt.Errorf("%w: schema_version %d, want %d", ErrAnnouncementFormat, a.SchemaVersion, AnnouncementSchemaVersion)
	}
	if !strings.EqualFold(a.Algorithm, AnnouncementAlgorithm) {
		return VerifiedAnnouncement{}, fmt.Errorf("%w: algorithm %q, want %q", ErrAnnouncementFormat, a.Algorithm, AnnouncementAlgorithm)
	}
	covered := map[string]bool{}
	for _, f := range a.SignedFields {
		covered[f] = true
	}
	if len(a.SignedFields) > 0 && (!covered["primal"] || !covered["version"]) {
		return VerifiedAnnouncement{}, fmt.Errorf("%w: signed_fields %q must cover primal and version", ErrAnnouncementFormat, a.SignedFields)
	}
	methodsCovered := len(a.SignedFields) == 0 || covered["methods"]
	pub, enc, err := decodeKeyMaterial(a.PublicKey, ed25519.PublicKeySize)
	if err != nil {
		return VerifiedAnnouncement{}, fmt.Errorf("%w: public_key: %v", ErrAnnouncementFormat, err)
	}
	sig, sigEnc, err := decodeKeyMaterial(a.Signature, ed25519.SignatureSize)
	if err != nil {
		return VerifiedAnnouncement{}, fmt.Errorf("%w: signature: %v", ErrAnnouncementFormat, err)
	}
	if sigEnc != enc {
		return VerifiedAnnouncement{}, fmt.Errorf("%w: public_key is %s but signature is %s", ErrAnnouncementFormat, enc, sigEnc)
	}
	signed := methods
	if !methodsCovered {
		signed = nil
	}
	msg := AnnouncementMessage(primal, version, signed)
	if err := verifyStrict(pub, msg[:], sig); err != nil {
		return VerifiedAnnouncement{}, err
	}
	return VerifiedAnnouncement{PublicKey: ed25519.PublicKey(pub), Encoding: enc, MethodsCovered: methodsCovered}, nil
}

// decodeKeyMaterial decodes s as hex or base64 and requires exactly n bytes.
// The two cannot be confused: n bytes are 2n hex characters, and a 2n-length
// base64 string decodes to 1.5n bytes.
func decodeKeyMaterial(s string, n int) ([]byte, string, error) {
	if len(s) == 2*n {
		b, err := hex.DecodeString(s)
		if err != nil {
			return nil, "", fmt.Errorf("%d characters but not hex: %v", len(s), err)
		}
		return b, "hex", nil
	}
	for _, e := range []struct {
		name string
		enc  *base64.Encoding
	}{
		{"base64", base64.StdEncoding.Strict()},
		{"base64", base64.RawStdEncoding.Strict()},
		{"base64", base64.URLEncoding.Strict()},
		{"base64", base64.RawURLEncoding.Strict()},
	} {
		if e.enc.EncodedLen(n) != len(s) {
			continue
		}
		b, err := e.enc.DecodeString(s)
		if err == nil && len(b) == n {
			return b, e.name, nil
		}
	}
	return nil, "", fmt.Errorf("want %d bytes as %d hex or %d base64 characters, got %d characters", n, 2*n, base64.StdEncoding.EncodedLen(n), len(s))
}

// verifyStrict verifies an Ed25519 signature and refuses small-order and
// non-canonically encoded public keys; crypto/ed25519 already refuses a
// non-canonical S.
func verifyStrict(pub, msg, sig []byte) error {
	if isWeakPublicKey(pub) {
		return fmt.Errorf("%w: public key has small order or a non-canonical encoding", ErrAnnouncementSignature)
	}
	if !ed25519.Verify(ed25519.PublicKey(pub), msg, sig) {
		return ErrAnnouncementSignature
	}
	return nil
}

// smallOrder lists the canonical encodings of the eight points of order
// dividing 8 on edwards25519, plus the two x = -0 spellings of the points
// with x = 0 that lenient decoders accept. A key among them verifies signatures on many
// messages, so it proves nothing.
var smallOrder = func() [][]byte {
	hexes := []string{
		"0100000000000000000000000000000000000000000000000000000000000000", // identity (order 1)
		"0100000000000000000000000000000000000000000000000000000000000080", // identity, x = -0
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // order 2
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", // order 2, x = -0
		"0000000000000000000000000000000000000000000000000000000000000000", // order 4
		"0000000000000000000000000000000000000000000000000000000000000080", // order 4
		"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a", // order 8
		"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa", // order 8
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05", // order 8
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85", // order 8
	}
	out := make([][]byte, len(hexes))
	for i, h := range hexes {
		out[i], _ = hex.DecodeString(h)
	}
	return out
}()

// isWeakPublicKey reports a small-order key or a non-canonical encoding
// (y ≥ p, the encodings crypto/ed25519 would reduce silently).
func isWeakPublicKey(pub []byte) bool {
	for _, s := range smallOrder {
		if bytes.Equal(pub, s) {
			return true
		}
	}
	return !canonicalY(pub)
}

// canonicalY reports whether the 255-bit y coordinate of an encoded point is
// below p = 2^255 - 19.
func canonicalY(pub []byte) bool {
	// y ≥ p iff the low 255 bits are in [p, 2^255): bytes 1..30 all 0xff,
	// byte 31 (sign bit masked) 0x7f, byte 0 ≥ 0xed.
	if pub[31]&0x7f != 0x7f {
		return true
	}
	for _, b := range pub[1:31] {
		if b != 0xff {
			return true
		}
	}
	return pub[0] < 0xed
}

// CompatSeed returns the ecoPrimals seed-derived Ed25519 seed
// SHA-256("primal-identity-key:" primal ":" nodeID). Anyone who knows the
// primal name and node id can compute it, so a key derived this way proves
// nothing about who signed.
func CompatSeed(primal, nodeID string) [32]byte {
	return sha256.Sum256([]byte("primal-identity-key:" + primal + ":" + nodeID))
}

// IsDerivedKey reports whether pub is the forgeable seed-derived key of
// (primal, nodeID) (see CompatSeed). The audit reports such a key: any
// signature it makes could have been made by anyone.
func IsDerivedKey(pub ed25519.PublicKey, primal, nodeID string) bool {
	seed := CompatSeed(primal, nodeID)
	derived := ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey)
	return derived.Equal(pub)
}
