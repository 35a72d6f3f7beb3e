// Package registry is the capmesh node: a trust-subordinate capability
// registry that speaks both the ecoPrimals registry methods (ipc.*) and the
// Genesis-Mesh RFC-005 Network-Authority HTTP shape, plus a router that
// forwards capability.call to a live, trusted provider.
//
// How data flows:
//
//   - A signed descriptor (POST /agents, or ipc.register {"descriptor": …})
//     is parsed and its signature verified first (registry/descriptor);
//     then liveness, network, trust (enrolment, CRL, key_compromise) and
//     anti-rollback are checked; only then is it written to the Store and,
//     once durable, published to the index.
//   - An unsigned local registration (ipc.register {name, capabilities,
//     endpoint}) is accepted only from a Unix-socket peer of the node's own
//     user, after the registry has called identity.get on the endpoint and
//     the names match. It lives for its TTL and is renewed by ipc.heartbeat;
//     it belongs to its registrant (the registration token ipc.register
//     returns, or the registrant's process), and a router that finds its
//     socket gone drops it (docs/routing.md).
//   - Reads (Find, FindFunc, ipc.discover, ipc.find_capability,
//     GET /agents?capability=) come from the in-memory capability index —
//     providers kept sorted per tag, verdicts cached per provider — filtered
//     by liveness and by the trust policy before anything is returned; each
//     result carries its trust verdict. Stored descriptor bytes are served
//     as they are.
//   - Every change bumps a monotonic registry version and is recorded as an
//     event (registered, replaced, expired, revoked, deregistered) that
//     ipc.watch delivers from a resumable cursor.
//   - Revocation (POST /admin/revoke, registry.revoke) appends to the
//     signed CRL and evicts the node's entries at once.
//
// Layout. The bindings (the JSON-RPC methods with the router, and the
// HTTP surface) are registry/api: a binding decodes a request, asks the
// Node, and encodes the answer; the Node's exported methods are all it
// may do. Signed documents are registry/descriptor. The storage contract
// (Store, SharedStore, MemStore) is registry/store, which registry/sqlite
// and registry/etcd implement. The in-memory state (registrations and the
// capability index, watermarks, the authority's certificates and CRL, the
// watch-event ring, and how a shared store's change applies to them) is
// registry/internal/state: pure, without I/O, goroutines or locks; so
// are the checks that need only that state (a descriptor's trust and
// anti-rollback, a renewal, a revocation's targets). A signed request is
// checked up to its nonce by registry/internal/signed; every refusal is
// a registry/internal/refusal Error (Error here). This package
// orchestrates: locks, Store I/O, commit and publish, loading,
// sweeping, following a shared store, local registrations and their
// probes, signed requests. Endpoint facts (the node's own listeners, a
// local-only address, a socket's primal) are package endpoint's.
//
// Locking. The index is authoritative for reads, the Store for restarts.
// A writer lock (wmu) serializes each change from its checks through its
// Store write; the readers' lock (mu) is write-locked only to publish it,
// so reads never wait for the disk. Package state says which lock each
// of its methods needs.
package registry
