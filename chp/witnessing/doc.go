// Package witnessing holds the witnessing objects of CHP v0.2 §12 and their
// verification: store heads (chp-store-head-v1, the flat fold, and v2, an
// RFC 6962 tree with inclusion and consistency proofs), the revocation head
// of proposal 0010, chain-witness statements (a peer's countersignature
// over a store head, with its host-identity attestation) and store-head
// anchors (an SSHSIG by a did:key). Like package chp, whose objects and
// attestation check it uses, it is pure: the standard library, canonical
// and chp only, so a witness can check a statement without linking a
// boundary.
//
// Data flow:
//
//	store: correlation → head hash ──StoreHeadRoot(scheme)──▶ store_head
//	  ──NewStoreHeadInclusion / NewStoreHeadConsistency──▶ proofs
//	  ──VerifyStoreHeadInclusion / VerifyStoreHeadConsistency──▶ bool
//	statement JSON ──ParseChainWitness (strict, bounded; signature and
//	  attestation checked)──▶ ChainWitness | ErrInvalidWitness
//	anchor JSON ──ParseStoreHeadAnchor (SSHSIG under AnchorNamespace by
//	  the did:key)──▶ StoreHeadAnchor | ErrInvalidWitness
//
// The host's side — holding heads, accepting statements, serving /head,
// /witness and /anchors — is in chp/boundary and its bindings
// (docs/witnessing.md).
package witnessing
