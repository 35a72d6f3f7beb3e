package wire

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/capmesh/capmesh/identity"
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

// SignAnnouncement signs primal, version and methods with the host's key and
// returns the signed_announcement object: schema 2, hex encoding (the
// standard's), signed_fields [primal, version, methods].
func SignAnnouncement(key *identity.PrivateKey, primal, version string, methods []string) SignedAnnouncement {
	msg := AnnouncementMessage(primal, version, methods)
	return SignedAnnouncement{
		SchemaVersion: AnnouncementSchemaVersion,
		Algorithm:     AnnouncementAlgorithm,
		PublicKey:     key.Public().Hex(),
		Signature:     hex.EncodeToString(key.Sign(msg[:])),
		SignedFields:  []string{"primal", "version", "methods"},
	}
}

// Errors returned by VerifyAnnouncement (wrapped; test with errors.Is).
var (
	// ErrAnnouncementSignature means the signature does not verify over
	// the canonical message of the given primal, version and methods, or
	// the key is one that proves nothing (small order, non-canonical); the
	// identity package's error is wrapped too.
	ErrAnnouncementSignature = errors.New("signed announcement: signature does not verify")
	// ErrAnnouncementFormat means the object is malformed or of a schema or
	// algorithm this package does not know.
	ErrAnnouncementFormat = errors.New("signed announcement: malformed")
)

// VerifiedAnnouncement describes a signed announcement that verified.
type VerifiedAnnouncement struct {
	// PublicKey is the key that signed; PublicKey.IsEcoPrimalsDerived
	// tells whether it is the forgeable seed-derived key of a (primal,
	// node id).
	PublicKey identity.PublicKey
	// Encoding is how public_key and signature were written: "hex" or
	// "base64" (either alphabet).
	Encoding string
	// MethodsCovered is false when signed_fields leaves out "methods": the
	// signature then covers only primal and version (the message is
	// computed over an empty method list), and the advertised methods are
	// not attested.
	MethodsCovered bool
}

// VerifyAnnouncement checks a signed_announcement against the primal,
// version and methods of the response it came with. It accepts public_key
// and signature in hex (the standard) or base64 (BearDog sends padded
// standard base64; base64url is read too), the same encoding for both;
// requires schema_version 2 and algorithm ed25519; and refuses a
// signed_fields list that does not cover primal and version. If
// signed_fields omits "methods", the signature is checked over an empty
// method list and MethodsCovered is false.
//
// Verification is the identity package's strict one: a non-canonical S, a
// small-order R or key, or a non-canonical key encoding is rejected, so a
// key cannot be made to accept a message it did not sign.
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
	pub, enc, err := identity.DecodeAny(a.PublicKey, ed25519.PublicKeySize)
	if err != nil {
		return VerifiedAnnouncement{}, fmt.Errorf("%w: public_key: %v", ErrAnnouncementFormat, err)
	}
	sig, sigEnc, err := identity.DecodeAny(a.Signature, ed25519.SignatureSize)
	if err != nil {
		return VerifiedAnnouncement{}, fmt.Errorf("%w: signature: %v", ErrAnnouncementFormat, err)
	}
	if family(enc) != family(sigEnc) {
		return VerifiedAnnouncement{}, fmt.Errorf("%w: public_key is %s but signature is %s", ErrAnnouncementFormat, enc, sigEnc)
	}
	signed := methods
	if !methodsCovered {
		signed = nil
	}
	msg := AnnouncementMessage(primal, version, signed)
	if err := identity.VerifyWith(pub, msg[:], sig); err != nil {
		return VerifiedAnnouncement{}, fmt.Errorf("%w: %w", ErrAnnouncementSignature, err)
	}
	key, err := identity.ParsePublicKey(pub)
	if err != nil { // not reached: VerifyWith parsed it
		return VerifiedAnnouncement{}, fmt.Errorf("%w: %w", ErrAnnouncementSignature, err)
	}
	return VerifiedAnnouncement{PublicKey: key, Encoding: family(enc), MethodsCovered: methodsCovered}, nil
}

// family is "hex" or "base64": the URL alphabet is base64 too (a base64url
// string without '-' or '_' is also standard base64).
func family(e identity.Encoding) string {
	if e == identity.Hex {
		return "hex"
	}
	return "base64"
}
