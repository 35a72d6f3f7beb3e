package descriptor

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/capmesh/capmesh/identity"
)

// DefaultSkew is the tolerance on the lower bound of the TTL window, as in
// the reference (5 minutes).
const DefaultSkew = 5 * time.Minute

// DecodePublicKey decodes a node public key: strict, padded standard base64
// of exactly 32 bytes that encode a point canonically and that is not of
// small order (libsodium, the reference's verifier, rejects those; Go's
// crypto/ed25519 does not, and with the identity point as the key the
// signature R=identity, S=0 verifies for every message). The checks are
// identity.ParsePublicKey's: one implementation in the project.
func DecodePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := identity.Decode(s, identity.Base64)
	if err != nil {
		return nil, fmt.Errorf("public key is not strict standard base64: %w", err)
	}
	k, err := identity.ParsePublicKey(b)
	if err != nil {
		return nil, err
	}
	return ed25519.PublicKey(k.Bytes()), nil
}

// VerifySignature checks an Ed25519 signature (strict base64, 64 bytes) over
// msg with the base64 public key pub, rejecting what libsodium rejects:
// small-order or non-canonical public keys and R values, and S ≥ L. The
// verification is identity.VerifyWith's; its key checks are byte
// comparisons, so no point is decompressed beyond what ed25519.Verify
// itself does.
func VerifySignature(pubB64 string, msg []byte, sigB64 string) error {
	pub, err := identity.Decode(pubB64, identity.Base64)
	if err != nil {
		return fmt.Errorf("public key is not strict standard base64: %w", err)
	}
	sig, err := identity.Decode(sigB64, identity.Base64)
	if err != nil {
		return fmt.Errorf("signature is not strict standard base64: %w", err)
	}
	return identity.VerifyWith(pub, msg, sig)
}

// Verify checks the descriptor's first signature against NodePublicKey over
// CanonicalBytes. Later signatures are ignored, as in the reference; key_id
// is not consulted (Sign sets it to the node key). Errors are *Error with
// CodeSignatureRequired or CodeInvalidSignature.
func (d *Descriptor) Verify() error {
	_, err := d.VerifyAndMarshal()
	return err
}

// VerifyAndMarshal is Verify, and on success also returns the normalized
// wire form (MarshalJSON), both from a single encoding of the descriptor:
// what a registry does with every registration.
func (d *Descriptor) VerifyAndMarshal() ([]byte, error) {
	if len(d.Signatures) == 0 {
		return nil, errorf(CodeSignatureRequired, "descriptor must be signed by the node key")
	}
	canon, wire, err := d.encode()
	if err != nil {
		return nil, errorf(CodeInvalid, "%v", err)
	}
	if err := VerifySignature(d.NodePublicKey, canon, d.Signatures[0].Sig); err != nil {
		return nil, errorf(CodeInvalidSignature, "%v", err)
	}
	return wire, nil
}

// Sign replaces the signatures with one Ed25519 signature by priv over
// CanonicalBytes, with key_id = node_public_key. NodePublicKey must be
// priv's public half.
func (d *Descriptor) Sign(priv ed25519.PrivateKey) error {
	pub := base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))
	if d.NodePublicKey == "" {
		d.NodePublicKey = pub
	}
	if d.NodePublicKey != pub {
		return errors.New("descriptor: node_public_key is not the signing key's public half")
	}
	sig := ed25519.Sign(priv, d.CanonicalBytes())
	d.Signatures = []Signature{{KeyID: pub, Sig: base64.StdEncoding.EncodeToString(sig)}}
	return nil
}

// Live reports whether the descriptor is a live provider at now: one
// half-open interval, registered_at − skew ≤ now < expires_at, compared as
// instants. (The reference is inclusive at expires_at, and then its cleanup
// hides the row at once; the half-open window gives the same visible
// behaviour without the contradiction.) Errors are *Error: CodeExpired or
// CodeNotYetValid.
func (d *Descriptor) Live(now time.Time, skew time.Duration) error {
	if !now.Before(d.ExpiresAt.Instant()) {
		return errorf(CodeExpired, "descriptor expired at %s", d.ExpiresAt)
	}
	if now.Before(d.RegisteredAt.Instant().Add(-skew)) {
		return errorf(CodeNotYetValid, "registered_at %s is more than %s in the future", d.RegisteredAt, skew)
	}
	return nil
}

// New builds an unsigned descriptor registered now for ttl.
func New(agentID, network string, pub ed25519.PublicKey, caps []string, ep Endpoint, now time.Time, ttl time.Duration) *Descriptor {
	if ep.Scheme == "" {
		ep.Scheme = "ws"
	}
	c := append([]string{}, caps...)
	return &Descriptor{
		AgentID:       agentID,
		NodePublicKey: base64.StdEncoding.EncodeToString(pub),
		NetworkName:   network,
		Capabilities:  c,
		Endpoint:      ep,
		RegisteredAt:  TimeOf(now),
		ExpiresAt:     TimeOf(now.Add(ttl)),
	}
}
