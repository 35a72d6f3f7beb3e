// Package canonical turns JSON into the exact bytes that capmesh signs and
// hashes, under each of the canonical forms the specifications we implement
// use. Interoperability depends on these bytes: one different escape and a
// Genesis-Mesh signature, a CHP evidence hash or a capability fingerprint no
// longer verifies.
//
// # Data flow
//
//	JSON text ──Parse──▶ Value (ordered tree, number literals kept) ──Profile.AppendCanonical──▶ bytes ──▶ SHA-256 / Ed25519
//	Go value ──govalue.FromGo──▶ Value
//
// Parse keeps object members in input order and each number exactly as
// written ("1.0", "1E+2", "12345678901234567890"), rejects duplicate keys,
// invalid UTF-8 and anything not RFC 8259, and bounds depth and size. Each
// profile then applies its own key order, escaping and number rules.
// Canonicalize (JSON text) and HashValue (a tree, without allocating)
// cover the common calls; package canonical/govalue converts Go values
// (FromGo) and canonicalizes or hashes them in one call (Marshal, SHA256,
// SHA256Hex).
//
// # Profiles
//
// ChpStableV1 ("chp-stable-v1", CHP evidence hashes and bundle signatures) is
// Python's json.dumps(obj, sort_keys=True):
//   - separators ", " and ": " (with the spaces);
//   - keys sorted by Unicode code point at every level;
//   - ASCII-only output: \" \\ \b \f \n \r \t, and every other code point
//     outside 0x20..0x7E — other C0 controls, DEL (0x7F) and all non-ASCII —
//     as \uXXXX with lowercase hex; astral code points as a surrogate pair
//     ("\ud83d\udd12"); '/', '<', '>', '&' are not escaped;
//   - integers exactly as written, "-0" as "0";
//   - no floats: CHP rule 6 forbids non-integer numbers in hashed content, so
//     any literal with '.', 'e' or 'E' is ErrFloat.
//
// Pitfalls: Go's encoding/json writes raw UTF-8, escapes <>& and U+2028/9
// and sorts only map keys, not struct fields; JavaScript's JSON.stringify
// writes no spaces and keeps insertion order. CHP's own Python reference
// does not enforce rule 6 (it would write 0.5), its TypeScript reference
// rejects non-integers but reads "1.0" as 1. PythonSortKeys reproduces the
// Python behaviour for checking such content; nothing should produce with it.
//
// JCS ("jcs", alias "rfc8785") is RFC 8785:
//   - no whitespace; separators "," and ":";
//   - keys sorted by UTF-16 code unit, which differs from code point order
//     when an astral character (U+10000 and up, whose first unit is a
//     surrogate 0xD800..0xDBFF) meets one in U+E000..U+FFFF: "\ud83d\udd12"
//     sorts before "\ufb00";
//   - strings as raw UTF-8; only '"', '\' and C0 controls are escaped (\b \f
//     \n \r \t, others \u00xx lowercase); DEL is not;
//   - every number is an IEEE double written as ECMAScript's
//     Number.prototype.toString writes it: "1.0" → 1, "1E2" → 100,
//     "-0" → 0, 1e21 → 1e+21, 1e-7 → 1e-7, and 12345678901234567890 →
//     12345678901234567000 (precision lost, as RFC 8785 specifies);
//   - lone surrogates cannot be written in UTF-8 and are ErrLoneSurrogate.
//
// ChpJcsV1 ("chp-jcs-v1") is CHP's use of RFC 8785 for bundle-header
// signatures: JCS plus rule 6 (non-integers are ErrFloat), and integers
// beyond ±(2^53−1) are ErrNumberRange because CHP's Python reference writes
// them exactly and its TypeScript reference rounds them.
//
// Genesis ("genesis", Genesis-Mesh RFC-005 descriptor, certificate and CRL
// signatures) is Python's json.dumps(obj, sort_keys=True,
// separators=(",", ":")) over a pydantic model dump:
//   - no whitespace; keys by code point; ASCII-only escaping as ChpStableV1;
//   - integers exactly (arbitrary precision, "-0" as "0");
//   - floats as Python's repr: shortest round-trip digits, fixed notation
//     with at least one fractional digit when the decimal exponent e is in
//     -4 <= e < 16 ("1.0", "0.25", "0.0001", "1000000000000000.0", "-0.0"),
//     otherwise d[.ddd]e±XX ("1e+16", "1e-05", "1.5e+300");
//   - literals that overflow a double (Python would write Infinity) are
//     ErrNumberRange, as are integers of more than 4300 digits (CPython's
//     json refuses to read them);
//   - timestamps are strings and must already be in pydantic's rendering:
//     package canonical/pydantic produces it ("Z" for UTC, other
//     offsets kept, ".ffffff" only when non-zero). Signing the wire string
//     instead of the normalized one gives an invalid signature.
//
// The GenesisMeshLabs Go SDK writes 1.0 as 1, 1e-05 as 0.00001 and raw UTF-8;
// it is not byte-compatible with the reference and not a model.
//
// Other packages add profiles with Register from an init function (the
// "khoralabs" profile of agent-capabilities fingerprints lives beside these);
// ProfileByName finds any of them by name.
//
// # Strings with lone surrogates
//
// JSON can express a lone UTF-16 surrogate ("\ud800") that UTF-8 cannot.
// Parse keeps it as WTF-8 (the 3-byte form ED A0 80..ED BF BF) so that each
// profile can do what its reference does: the Python-based profiles escape it
// back to "\ud800", JCS and ChpJcsV1 reject it.
package canonical
