// Package btsp is the family-scoped secure transport of the ecoPrimals
// world (BTSP): a four-message handshake that proves both ends hold the
// same family seed, then length-prefixed AEAD frames that each carry one
// JSON-RPC message.
//
// The Capability Wire Standard only names BTSP (the transport_security
// object and the rejection frame); the handshake is the one ecoPrimals
// describe, as summarised in shared/spec/ecoprimals/BTSP-NOTES.md. Where
// those documents leave a choice open, the choice is recorded in
// docs/btsp.md and docs/DECISIONS.md.
//
// # Flow
//
//	client                                        server (Server / Accept)
//	  │  ClientHello {protocol, version, client_ephemeral_pub}  │
//	  │ ───────────────────────────────────────────────────────▶│ first byte: '{' → JSON lines,
//	  │                                                         │ anything else → binary frames
//	  │  ServerHello {version, server_ephemeral_pub, challenge} │ (0xEC 0x01 signal skipped)
//	  │ ◀───────────────────────────────────────────────────────│
//	  │  ChallengeResponse {response = HMAC(hk, ch‖cpub‖spub),   │
//	  │                     preferred_cipher}                   │
//	  │ ───────────────────────────────────────────────────────▶│ HMAC checked against the seed
//	  │  HandshakeComplete {cipher, session_id}                 │ (or the error frame, then close)
//	  │ ◀───────────────────────────────────────────────────────│
//	  │  frames: len(4, big-endian) ‖ AEAD(key_dir, nonce=ctr, aad=len)
//	  │ ◀──────────────────────────────────────────────────────▶│
//
// hk = HKDF-SHA256(ikm = family seed, salt = "btsp-v1", info = "handshake").
// The session keys are HKDF-SHA256(ikm = X25519 shared secret, salt = hk,
// info = "btsp-session-v1"), 64 bytes: client→server, then server→client.
// Because the seed-derived hk salts the session keys, a server that does
// not hold the seed cannot read or forge a single frame: both ends are
// authenticated, not only the client.
//
// A [Conn] presents the secured stream as newline-delimited JSON, so the
// JSON-RPC engine runs on it unchanged: each frame read becomes one line,
// each line written becomes one frame. On the accepting side, a
// connection that starts with plain JSON-RPC is either passed through
// (BTSP not required), filtered against a cleartext whitelist, or answered
// with the standard's rejection frame and closed — never dropped silently.
package btsp
