// Package access decides, once for every binding, who a caller is and
// what it may do. A binding — a Unix socket (SO_PEERCRED), newline
// JSON-RPC over TCP, the HTTP JSON-RPC bridge, the CHP HTTP routes, a
// node routing a call on — only establishes the caller's Principal from
// what it can see (the kernel's peer credentials, an X-CHP-Key, a node's
// attestation); Policy.Authorize then answers the same way whatever the
// door.
//
// Principals, strongest first:
//
//   - SameUser: this process, or a Unix peer whose SO_PEERCRED uid is the
//     host's own; also a caller a same-user node attests as such.
//   - NamedKey: a caller that presented a named (optionally scoped) key.
//   - SharedKey: a caller that presented a shared key (authenticated, but
//     nobody in particular).
//   - OtherUser: a Unix peer of another uid.
//   - Anonymous: a network caller without a credential.
//
// What each may do (Op) is the table of docs/access.md: the same user may
// do everything; key holders may invoke (within their scope), describe and
// read evidence; other users and anonymous callers may do so only on an
// open host (one without keys that opened a TCP or HTTP listener itself,
// the CHP local-first default); only the same user administers; discovery
// and health are public. Registration is left to the registry, whose
// credential is a signed descriptor or the same user's Unix peer.
//
// A node that routes a call passes the caller on in the forwarded params'
// _meta (Forward); a host believes that attestation only from a peer it
// would trust with everything anyway — a Unix peer of its own uid — and
// otherwise ignores it.
package access
