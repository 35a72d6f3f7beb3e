// Package wire implements the Capability Wire Standard v1.0: the shapes a
// capability host emits when it describes itself over JSON-RPC, and a reader
// that understands what every real host actually sends.
//
// Two directions flow through this package.
//
// Emitting (used by the host library): a host fills a [CapabilitiesList] (the
// Level 3 envelope answered to capabilities.list), an [Identity]
// (identity.get), the health results [Liveness], [Readiness] and [HealthCheck],
// and a [TransportSecurity] object. Method names are checked with
// [ValidateMethodName] when they are registered, and the announcement is
// signed with [SignAnnouncement], which hashes [AnnouncementMessage].
// Everything marshals with encoding/json to the exact field names of the
// standard.
//
// Reading (used by capmesh inspect, the audit and the registry): the result
// member of a capabilities.list response goes into [Parse], which recognises
// Formats A-E, the Level 2/3 envelope, methods given as objects, and the
// quirks recorded from real primals, and returns a [Capabilities] with the
// callable methods, the groups, the metadata and a list of [Deviation]s from
// the standard. [VerifyAnnouncement] checks a signed_announcement (hex or
// base64), [ReadHealth] interprets any of the health shapes seen in the wild,
// and [Level] turns a parsed result plus optional live observations (a
// [Probe]) into a compliance [Report] that names every missed requirement.
//
//	result (json.RawMessage) ──Parse──▶ *Capabilities ──Level(c, probe)──▶ Report
//	                                         │
//	                                         └─ SignedAnnouncement ──VerifyAnnouncement──▶ key, error
//
// Apart from [Inspect], which asks a live host through a jsonrpc.Caller and
// feeds the answers to the functions above, the package does no I/O: callers
// bring the bytes (from a socket, a file or a test) and the observations.
package wire
