package identity

import (
	"crypto/sha256"
)

// DeriveEcoPrimalsCompat returns the key the ecoPrimals primals derive from
// their runtime identity (Capability Wire Standard, signed announcements):
//
//	seed = SHA-256("primal-identity-key:" || name || ":" || nodeID)
//
// WARNING: this key is not secret. Anyone who knows the primal name and the
// node id — both announced in the clear — can compute it and sign as this
// host. Use it only to interoperate with peers that expect that derivation,
// never as a default; capmesh's own default is a random key persisted by
// LoadOrCreate, and `capmesh audit` reports derived keys as forgeable.
func DeriveEcoPrimalsCompat(name, nodeID string) *PrivateKey {
	seed := ecoPrimalsSeed(name, nodeID)
	k, _ := NewKeyFromSeed(seed[:]) // a SHA-256 digest is always 32 bytes
	k.derived = true
	return k
}

func ecoPrimalsSeed(name, nodeID string) [32]byte {
	return sha256.Sum256([]byte("primal-identity-key:" + name + ":" + nodeID))
}

// IsEcoPrimalsDerived reports whether p is the key DeriveEcoPrimalsCompat
// gives for (name, nodeID), i.e. a key anyone can forge.
func (p PublicKey) IsEcoPrimalsDerived(name, nodeID string) bool {
	return DeriveEcoPrimalsCompat(name, nodeID).Public() == p
}
