// Package identity holds capmesh's Ed25519 keys and makes them hard to
// misuse.
//
// A host has one key. LoadOrCreate(DefaultKeyPath(dataDir)) loads it, or on
// first start generates a random one and writes it as PKCS#8 PEM with mode
// 0600 in a 0700 directory ($XDG_STATE_HOME/capmesh/keys/identity.pem, or
// under --data-dir); Load refuses a key file that others can read or
// write. A PrivateKey never prints, logs or JSON-encodes its secret.
//
// Verification is strict, as in libsodium, the reference of Genesis-Mesh
// and of most Ed25519 deployments: besides the checks of Go's crypto/ed25519
// (lengths, S < L, R compared byte for byte), PublicKey.Verify and
// ParsePublicKey reject non-canonical public keys and the 8 small-order
// points as keys or as R. Go's crypto/ed25519 alone accepts a small-order
// key such as the identity point, with which the signature (R=identity,
// S=0) verifies for every message. Every failure is a distinct error value
// usable with errors.Is, of class ErrInvalidSignature or ErrInvalidPublicKey.
//
// Keys are identified two ways: KeyID is CHP's key_id, the first 16 hex
// digits of SHA-256 over the raw key; GenesisKeyID is RFC-005's, the base64
// key itself.
//
// Binary values travel in JSON as text. Encode and Decode implement the
// Capability Wire Standard's per-field encodings — base64 (strict standard
// base64, padded, the default), hex, base64url, utf8 and none — and
// DecodeAny reads a key or signature in whichever of hex and base64 its
// length shows, since the standard's text (hex) and bearDog (base64)
// disagree.
//
// DeriveEcoPrimalsCompat reproduces the ecoPrimals derivation
// SHA-256("primal-identity-key:" || name || ":" || node_id). Anyone who
// knows those two public strings can derive that key, so it exists only for
// compatibility and is never a default.
package identity
