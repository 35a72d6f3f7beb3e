// Package merkle is capmesh's append-only log tree: an RFC 9162 (Certificate
// Transparency 2.0) Merkle tree over the global evidence sequence, with
// signed tree heads, inclusion proofs for any event and consistency proofs
// between any two heads.
//
// Hashing is RFC 9162 §2.1 exactly: a leaf hashes as SHA-256(0x00 ‖ data),
// an interior node as SHA-256(0x01 ‖ left ‖ right), and the empty tree as
// SHA-256(""). Leaf i is the i-th event of the store's global sequence, so
// appending an event never changes an existing leaf and every older tree is
// a prefix of every newer one — what makes consistency proofs possible.
//
// Data flow:
//
//	store event bytes ─LeafHash─▶ Tree.Append ─▶ Tree.RootAt(n) ─SignTreeHead─▶ SignedTreeHead
//	                                   │
//	                                   ├─ Tree.InclusionProof(i, n)   ─▶ InclusionProof   (RFC 9162 PATH)
//	                                   └─ Tree.ConsistencyProof(m, n) ─▶ ConsistencyProof (RFC 9162 PROOF)
//
//	offline: VerifyInclusion(key, head, leaf, proof), VerifyConsistency(key, old, new, proof)
//
// A Tree keeps every perfect subtree's hash in memory (about 2n hashes, 64
// MiB at a million leaves), so an append costs O(log n) amortised hashes
// and a proof for any historical size n costs O(log² n) hash operations at
// worst: tens of microseconds at a million leaves. Proofs and heads have a
// strict JSON form (json.go); all binary values in it are lowercase hex.
//
// Verification is offline and needs only the log's public key: heads are
// checked with identity's strict Ed25519 verification (small-order keys and
// non-canonical signatures are refused), proofs with RFC 9162's own
// verification algorithms (§2.1.3.2, §2.1.4.2), which are independent of the
// code that generates them.
package merkle
