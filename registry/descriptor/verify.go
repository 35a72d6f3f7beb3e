package descriptor

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"filippo.io/edwards25519"
)

// DefaultSkew is the tolerance on the lower bound of the TTL window, as in
// the reference (5 minutes).
const DefaultSkew = 5 * time.Minute

// DecodePublicKey decodes a node public key: strict, padded standard base64
// of exactly 32 bytes that encode a point canonically and that is not of
// small order (libsodium, the reference's verifier, rejects those; Go's
// crypto/ed25519 does not, and with the identity point as the key the
// signature R=identity, S=0 verifies for every message).
func DecodePublicKey(s string) (ed25519.PublicKey, error) {
	if v, ok := keyCache.Load(s); ok {
		return v.(ed25519.PublicKey), nil
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("public key is not strict standard base64: %w", err)
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public key is %d bytes, want %d", len(b), ed25519.PublicKeySize)
	}
	if err := checkPoint(b); err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	if keyCacheLen.Add(1) > maxKeyCache {
		keyCache.Clear()
		keyCacheLen.Store(0)
	}
	keyCache.Store(s, ed25519.PublicKey(b))
	return ed25519.PublicKey(b), nil
}

// keyCache remembers keys that passed the point checks (a decompression
// costs about a third of a verification); a node re-registers under the
// same key every refresh.
var (
	keyCache    sync.Map
	keyCacheLen atomic.Int64
)

const maxKeyCache = 1 << 17

// smallOrderR holds the canonical encodings of the 8 torsion points.
var smallOrderR = func() map[[32]byte]bool {
	// An order-8 point (the generator of the torsion subgroup).
	g, _ := hex.DecodeString("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05")
	p, err := new(edwards25519.Point).SetBytes(g)
	if err != nil {
		panic(err)
	}
	m := map[[32]byte]bool{}
	q := edwards25519.NewIdentityPoint()
	for i := 0; i < 8; i++ {
		m[[32]byte(q.Bytes())] = true
		q = new(edwards25519.Point).Add(q, p)
	}
	if len(m) != 8 {
		panic("descriptor: torsion table")
	}
	return m
}()

var (
	errSmallOrder   = errors.New("small-order point")
	errNonCanonical = errors.New("non-canonical point encoding")
)

// checkPoint rejects encodings that are not a point, not canonical, or of
// small order (the 8 torsion points).
func checkPoint(b []byte) error {
	p, err := new(edwards25519.Point).SetBytes(b)
	if err != nil {
		return errors.New("not a valid curve point")
	}
	if string(p.Bytes()) != string(b) {
		return errNonCanonical
	}
	if new(edwards25519.Point).MultByCofactor(p).Equal(edwards25519.NewIdentityPoint()) == 1 {
		return errSmallOrder
	}
	return nil
}

// VerifySignature checks an Ed25519 signature (strict base64, 64 bytes) over
// msg with the base64 public key pub, rejecting what libsodium rejects:
// small-order or non-canonical public keys and R values, and S ≥ L
// (crypto/ed25519 already refuses that one).
func VerifySignature(pubB64 string, msg []byte, sigB64 string) error {
	pub, err := DecodePublicKey(pubB64)
	if err != nil {
		return err
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(sigB64)
	if err != nil {
		return fmt.Errorf("signature is not strict standard base64: %w", err)
	}
	if len(sig) != ed25519.SignatureSize {
		return fmt.Errorf("signature is %d bytes, want %d", len(sig), ed25519.SignatureSize)
	}
	// R: crypto/ed25519 compares R byte-wise with a canonical encoding, so
	// a non-canonical R already fails; libsodium also refuses the 8
	// small-order R values, which a byte comparison finds without a point
	// decompression.
	if smallOrderR[[32]byte(sig[:32])] {
		return fmt.Errorf("signature R: %w", errSmallOrder)
	}
	if !ed25519.Verify(pub, msg, sig) {
		return errors.New("signature does not verify")
	}
	return nil
}

// Verify checks the descriptor's first signature against NodePublicKey over
// CanonicalBytes. Later signatures are ignored, as in the reference; key_id
// is not consulted (Sign sets it to the node key). Errors are *Error with
// CodeSignatureRequired or CodeInvalidSignature.
func (d *Descriptor) Verify() error {
	if len(d.Signatures) == 0 {
		return errorf(CodeSignatureRequired, "descriptor must be signed by the node key")
	}
	if err := VerifySignature(d.NodePublicKey, d.CanonicalBytes(), d.Signatures[0].Sig); err != nil {
		return errorf(CodeInvalidSignature, "%v", err)
	}
	return nil
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
