// Package fingerprint computes capability fingerprints identical to
// @khoralabs/agent-capabilities: the 64-hex SHA-256 hashes of tools,
// toolkits, dynamic toolkits, registered agents, runtimes, invocation
// contexts and runtime tool bindings, plus capability links and their
// diffs. A Go service that hashes a tool differently from the TypeScript
// agent that declared it breaks every cache, audit trail and link between
// them, so each payload builder follows the reference field for field —
// including where its code differs from its own documentation
// (shared/spec/hashing/HASHING.md records those places).
//
// Data flow: a declaration (Go structs, or JSON documents read with the
// Decode functions) → its canonical pre-hash bytes → SHA-256 → lowercase
// hex. The canonical bytes are the khoralabs form of package canonical
// (keys by ICU root collation, array-index keys first, JSON.stringify
// strings and numbers) of a pre-hash payload. The *Payload functions build
// those payloads as trees — for UIs, diffs and `capmesh hash --payload` —
// and every hash function is the SHA-256 of its payload's khoralabs form:
// one path, so what `--payload` shows is what was hashed. The hash
// functions build their payload in a pooled tree and reuse its storage
// once the bytes are hashed; the *Payload functions return trees of their
// own. A toolkit hashes each member once. HashPlainObject encodes a plain JSON tree in one pass
// and copies it to resolve markers only when it finds one. Hashes are not
// cached on the declarations: their fields are exported and mutable, and a
// stale fingerprint is worse than a slow one.
//
// Why not RFC 8785: the reference sorts keys with localeCompare, i.e. Node's
// ICU collation ("_" < "-" < "0" < "a" < "A" < "b"), where JCS sorts by
// UTF-16 code unit; a JavaScript object also lists array-index keys first
// whatever the sort did; and JSON.stringify escapes lone surrogates that JCS
// rejects. Only the number format is the same.
//
// Two tool hashes exist upstream and both are here: the static hash of a
// tool() declaration (Tool.StaticHash, with policyBindings) and the hash of
// an evaluated spec (ToolSpec.Hash, no policyBindings, instructions split
// on "\n\n"), which is what tools under dynamic toolkits get; the wire form
// (ToolSpecWire) additionally hashes an empty description as null.
//
// JavaScript values JSON cannot carry are written as single-key marker
// objects: {"$undefined":true}, {"$function":"name"}, {"$symbol":"d"},
// {"$date":"2024-01-02T03:04:05.000Z"}, {"$number":"-0"|"NaN"|"Infinity"},
// {"$bigint":"1"}, {"$ancestor":n} (a cycle) and {"$literal":obj} to escape
// an object that looks like a marker.
package fingerprint
