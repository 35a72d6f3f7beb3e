package identity

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
)

// PublicKey is an Ed25519 public key that has passed ParsePublicKey's
// checks. The zero value is not a valid key (Verify rejects it). PublicKey
// is comparable.
type PublicKey struct {
	b [ed25519.PublicKeySize]byte
}

// ParsePublicKey checks a raw 32-byte Ed25519 public key the way libsodium
// does — canonical encoding, not one of the small-order points, on the
// curve — and returns it. The errors are ErrPublicKeyLength,
// ErrNonCanonicalPublicKey, ErrSmallOrderPublicKey and
// ErrPublicKeyNotOnCurve.
func ParsePublicKey(b []byte) (PublicKey, error) {
	if err := checkPublicKey(b); err != nil {
		return PublicKey{}, err
	}
	var p PublicKey
	copy(p.b[:], b)
	return p, nil
}

// ParsePublicKeyString decodes a public key written as hex (64 characters,
// optional 0x), standard base64 (44, padded) or base64url (43 or 44), the
// forms the specifications use, then checks it as ParsePublicKey does.
func ParsePublicKeyString(s string) (PublicKey, error) {
	b, _, err := DecodeAny(s, ed25519.PublicKeySize)
	if err != nil {
		return PublicKey{}, fmt.Errorf("identity: public key: %w", err)
	}
	return ParsePublicKey(b)
}

// Bytes returns a copy of the 32 raw key bytes.
func (p PublicKey) Bytes() []byte { return append([]byte(nil), p.b[:]...) }

// Hex is the key in lowercase hex (the Capability Wire Standard's
// signed_announcement form).
func (p PublicKey) Hex() string { return hex.EncodeToString(p.b[:]) }

// Base64 is the key in padded standard base64 (CHP public_key, RFC-005
// node_public_key, bearDog's announcements).
func (p PublicKey) Base64() string { return base64.StdEncoding.EncodeToString(p.b[:]) }

// String is Base64.
func (p PublicKey) String() string { return p.Base64() }

// IsZero reports whether p is the zero value (no key).
func (p PublicKey) IsZero() bool { return p == PublicKey{} }

// KeyID is capmesh's short key identifier, the CHP one: the first 16 hex
// digits of SHA-256 over the raw key (CHP key_id, e.g. "56475aa75463474c").
// Genesis-Mesh RFC-005 uses the whole base64 key as its key_id instead; see
// GenesisKeyID.
func (p PublicKey) KeyID() string {
	sum := sha256.Sum256(p.b[:])
	return hex.EncodeToString(sum[:8])
}

// GenesisKeyID is the key_id Genesis-Mesh RFC-005 descriptors carry in their
// signatures: by convention the node public key itself, in base64.
func (p PublicKey) GenesisKeyID() string { return p.Base64() }

// Verify checks sig over msg strictly, as libsodium does: Go's
// crypto/ed25519 alone accepts small-order keys and R values, with which a
// forged signature can verify for every message. The error is nil or one of
// the Err* values of class ErrInvalidSignature or ErrInvalidPublicKey.
func (p PublicKey) Verify(msg, sig []byte) error { return verify(p.b[:], msg, sig) }

// MarshalText writes the key as base64, so keys read and write naturally in
// JSON and config files.
func (p PublicKey) MarshalText() ([]byte, error) {
	if p.IsZero() {
		return nil, errors.New("identity: cannot marshal the zero public key")
	}
	return []byte(p.Base64()), nil
}

// UnmarshalText accepts what ParsePublicKeyString accepts.
func (p *PublicKey) UnmarshalText(text []byte) error {
	k, err := ParsePublicKeyString(string(text))
	if err != nil {
		return err
	}
	*p = k
	return nil
}

// VerifyWith is PublicKey.Verify for a raw key: it parses pub with the same
// checks first. Use it for keys that arrive with a signature, such as a
// signed announcement's public_key.
func VerifyWith(pub, msg, sig []byte) error { return verify(pub, msg, sig) }

// PrivateKey is an Ed25519 signing key. It never prints or logs its secret:
// String, GoString and LogValue show only the public key id, and
// MarshalJSON refuses.
type PrivateKey struct {
	priv    ed25519.PrivateKey
	pub     PublicKey
	derived bool
}

// Generate returns a new random key from crypto/rand.
func Generate() (*PrivateKey, error) {
	var seed [ed25519.SeedSize]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("identity: generate: %w", err)
	}
	return NewKeyFromSeed(seed[:])
}

// NewKeyFromSeed returns the key of a 32-byte RFC 8032 seed (the "private
// key" of RFC 8032 and of most libraries' raw formats).
func NewKeyFromSeed(seed []byte) (*PrivateKey, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("identity: seed is %d bytes, want %d", len(seed), ed25519.SeedSize)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	k := &PrivateKey{priv: priv}
	copy(k.pub.b[:], priv[32:])
	return k, nil
}

// Public returns the public half.
func (k *PrivateKey) Public() PublicKey { return k.pub }

// Sign signs msg (pure Ed25519, RFC 8032: no prehash, no context).
func (k *PrivateKey) Sign(msg []byte) []byte { return ed25519.Sign(k.priv, msg) }

// Ed25519 returns the key in the standard library's form, for APIs that
// take an ed25519.PrivateKey or a crypto.Signer (the CHP boundary, TLS).
// It is the secret: do not log or persist it other than through Save.
func (k *PrivateKey) Ed25519() ed25519.PrivateKey { return k.priv }

// IsDerived reports whether the key came from DeriveEcoPrimalsCompat and is
// therefore forgeable by anyone who knows its name and node id.
func (k *PrivateKey) IsDerived() bool { return k.derived }

func (k *PrivateKey) seed() []byte { return k.priv.Seed() }

// String identifies the key without revealing it.
func (k *PrivateKey) String() string {
	return "ed25519 private key " + k.pub.KeyID() + " (redacted)"
}

// GoString is String, so %#v does not dump the secret either.
func (k *PrivateKey) GoString() string { return k.String() }

// LogValue keeps the secret out of slog output.
func (k *PrivateKey) LogValue() slog.Value { return slog.StringValue(k.String()) }

// MarshalJSON refuses: a private key is written only by Save.
func (k *PrivateKey) MarshalJSON() ([]byte, error) {
	return nil, errors.New("identity: refusing to encode a private key as JSON")
}
