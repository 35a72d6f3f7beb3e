package merkle

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/capmesh/capmesh/identity"
)

// SignedTreeHead is a log's signed statement that its tree of TreeSize
// leaves has root RootHash.
type SignedTreeHead struct {
	// TreeSize is the number of leaves (events) the head covers.
	TreeSize uint64
	// RootHash is MTH(D[0:TreeSize]).
	RootHash Hash
	// Timestamp is when the head was signed, in milliseconds since the
	// Unix epoch (as RFC 6962 timestamps are).
	Timestamp uint64
	// KeyID names the signing key: CHP's key_id, the first 16 hex digits of
	// SHA-256 over the raw Ed25519 public key (identity.PublicKey.KeyID).
	// It is a lookup hint, not signed: Verify checks that it names the key
	// the signature verifies under.
	KeyID string
	// Signature is the Ed25519 signature over SignedBytes.
	Signature []byte
}

// sthDomain opens the signed bytes of every tree head, so that a tree-head
// signature can never be taken for a signature over anything else the
// same key signs (descriptors, announcements, evidence bundles).
const sthDomain = "capmesh-sth-v1\n"

// signedLen is the length of SignedBytes: domain, size, timestamp, root.
const signedLen = len(sthDomain) + 8 + 8 + HashSize

// SignedBytes is the message a tree head's signature covers, a fixed
// 63-byte layout:
//
//	"capmesh-sth-v1\n"   15 bytes, ASCII, the domain separator and version
//	tree_size            8 bytes, unsigned, big-endian
//	timestamp            8 bytes, unsigned, big-endian, ms since the epoch
//	root_hash            32 bytes
func (h SignedTreeHead) SignedBytes() []byte {
	b := make([]byte, 0, signedLen)
	b = append(b, sthDomain...)
	b = binary.BigEndian.AppendUint64(b, h.TreeSize)
	b = binary.BigEndian.AppendUint64(b, h.Timestamp)
	return append(b, h.RootHash[:]...)
}

// Signer signs tree heads; *identity.PrivateKey is one.
type Signer interface {
	Public() identity.PublicKey
	Sign(msg []byte) []byte
}

// SignTreeHead signs the head of a tree of size leaves with root root at
// time at (kept to the millisecond; a time before the epoch is refused).
func SignTreeHead(key Signer, size uint64, root Hash, at time.Time) (SignedTreeHead, error) {
	ms := at.UnixMilli()
	if ms < 0 {
		return SignedTreeHead{}, fmt.Errorf("%w: timestamp %s before the Unix epoch", ErrOutOfRange, at)
	}
	h := SignedTreeHead{TreeSize: size, RootHash: root, Timestamp: uint64(ms), KeyID: key.Public().KeyID()}
	h.Signature = key.Sign(h.SignedBytes())
	return h, nil
}

// SignHead signs the tree's head at size leaves (any size up to the
// current one) at time at.
func (t *Tree) SignHead(key Signer, size uint64, at time.Time) (SignedTreeHead, error) {
	root, err := t.RootAt(size)
	if err != nil {
		return SignedTreeHead{}, err
	}
	return SignTreeHead(key, size, root, at)
}

// Time is the head's timestamp as a time.Time.
func (h SignedTreeHead) Time() time.Time { return time.UnixMilli(int64(h.Timestamp)).UTC() }

// Verify checks the head's signature under key, strictly (identity's
// libsodium-equivalent checks), and that KeyID names key. It returns nil or
// an error matching ErrInvalidHead (and, for a bad signature or key, the
// identity error class too).
func (h SignedTreeHead) Verify(key identity.PublicKey) error {
	if h.KeyID != key.KeyID() {
		return fmt.Errorf("%w: key_id %q is not the verifying key's %q", ErrInvalidHead, h.KeyID, key.KeyID())
	}
	if err := key.Verify(h.SignedBytes(), h.Signature); err != nil {
		return fmt.Errorf("%w: tree size %d: %w", ErrInvalidHead, h.TreeSize, err)
	}
	return nil
}

// VerifyInclusion is the offline check `capmesh evidence prove` makes: head
// is signed by key, proof is for head's tree size, and leaf (the leaf hash
// of entry proof.LeafIndex) is in that tree. It returns nil or an error
// matching ErrInvalidHead or ErrInvalidProof.
func VerifyInclusion(key identity.PublicKey, head SignedTreeHead, leaf Hash, proof InclusionProof) error {
	if err := head.Verify(key); err != nil {
		return err
	}
	if proof.TreeSize != head.TreeSize {
		return fmt.Errorf("%w: proof for tree size %d, head for %d", ErrInvalidProof, proof.TreeSize, head.TreeSize)
	}
	return proof.Verify(leaf, head.RootHash)
}

// VerifyConsistency is the offline check `capmesh evidence consistency`
// makes: both heads are signed by key, proof runs from older's size to
// newer's, and older's tree is a prefix of newer's. Heads of equal size
// must have equal roots. Timestamps are not compared: the proof is about
// trees, and a log's clock is not evidence. It returns nil or an error
// matching ErrInvalidHead or ErrInvalidProof.
func VerifyConsistency(key identity.PublicKey, older, newer SignedTreeHead, proof ConsistencyProof) error {
	if err := older.Verify(key); err != nil {
		return fmt.Errorf("older head: %w", err)
	}
	if err := newer.Verify(key); err != nil {
		return fmt.Errorf("newer head: %w", err)
	}
	if proof.TreeSize1 != older.TreeSize || proof.TreeSize2 != newer.TreeSize {
		return fmt.Errorf("%w: proof from size %d to %d, heads of sizes %d and %d",
			ErrInvalidProof, proof.TreeSize1, proof.TreeSize2, older.TreeSize, newer.TreeSize)
	}
	return proof.Verify(older.RootHash, newer.RootHash)
}
