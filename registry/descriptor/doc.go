// Package descriptor is the RFC-005 capability descriptor (the Genesis-Mesh
// AgentDescriptor) exactly as the reference signs and verifies it.
//
// Data flows one way: wire bytes → Parse (schema, defaults filled, unknown
// fields dropped, timestamps parsed as instants with their offset kept) →
// Verify (strict base64, small-order keys and non-canonical encodings
// rejected, Ed25519 over CanonicalBytes; VerifyAndMarshal also returns the
// wire form from the same single encoding) → Live (the TTL window as instants).
// A registry calls them in that order and reads nothing else before Verify
// succeeds. A provider goes the other way: New → Sign → MarshalJSON.
//
// CanonicalBytes are Python's json.dumps(sort_keys=True,
// separators=(",", ":")) of the normalized model without "signatures", with
// timestamps rendered the way pydantic renders them (microseconds only when
// non-zero, "Z" for UTC, other offsets kept). See
// ../shared/spec/genesis-mesh/RFC-005-NOTES.md for every rule.
//
// The package is small and depends only on the standard library, the
// shared canonical profiles and identity (whose strict, libsodium-equivalent
// Ed25519 checks it uses), so host processes can import it.
package descriptor
