// Package chp holds the Capability Host Protocol itself: its objects, its
// codes, evidence hashing, bundles and their verification. It is pure — it
// imports only the standard library and package canonical — so that anything
// that only checks evidence (capmesh evidence verify, the conformance audit,
// a third-party verifier) carries no policy engine, schema validator or
// database with it. The boundary that produces evidence lives in
// chp/boundary, the protocol's JSON Schemas in chp/schema, its HTTP and
// JSON-RPC bindings in chp/chphttp and chp/chprpc; the witnessing objects
// (store heads, chain-witness statements, anchors, SSHSIG) in the equally
// pure chp/witnessing.
//
// Data flow of a check:
//
//	exported bundle (JSON) ──VerifyBundle──▶ for each event: the stable object
//	  (chp-event-hash-v1/v2) → content_hash, prev_hash link, payload_commitment,
//	  capmesh attribution binding (event id, IDBindMarker; legacy BindKey)
//	  → root_hash → completeness claim
//	  → signed tier: header signature (chp-stable-v1 | chp-jcs-v1) and the
//	    host-identity attestation ──▶ BundleVerification
//
//	stored events of a correlation ──VerifyChain──▶ ChainVerification (/verify)
//
// And of an invocation's input: JSON ──ParseEnvelope (lenient, defaults
// filled by Normalize)──▶ InvocationEnvelope, which chp/boundary runs
// through its gate pipeline.
//
// Of a presented mandate (§10): JSON ──ParseMandate (strict, bounded, chains
// ≤ MandateMaxDepth)──▶ Mandate ──VerifyMandate (header signature,
// principal attestation, window at host time, delegate, revocation per
// link, attenuation of each parent)──▶ MandateVerification; a
// mandate-revocation: ParseMandateRevocation ──VerifyMandateRevocation.
//
// Every byte hashed or signed comes from package canonical (chp-stable-v1,
// chp-jcs-v1, and Python's float rendering for checking foreign content).
// Verification fails closed: malformed input yields an invalid verdict,
// never a panic.
//
//	v, err := chp.VerifyBundle(data, &chp.VerifyOptions{RequireSigned: true})
//	if err != nil || !v.Valid { … v.Reason, v.Checks … }
package chp
