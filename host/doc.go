// Package host is the runtime for capability providers: a Go program
// declares who it is and what it can do, and the host serves all of it the
// way the specifications ask — the Capability Wire Standard (Level 3
// capabilities.list with a signed announcement, identity.get, the health
// triad), the Primal IPC Protocol v3.1 (newline JSON-RPC on a Unix socket
// in the biomeos directory with a capability-domain symlink, optional TCP
// and HTTP, standalone start, registration with a node), and the
// Capability Host Protocol (every capability call passes a CHP boundary and
// leaves execution evidence).
//
// A provider in ten lines:
//
//	h, err := host.New(host.Info{Name: "hasher", Version: "1.0.0", Domain: "hash", License: "MIT"}, nil)
//	if err != nil { … }
//	err = host.Register(h, "hash.sha256", func(ctx context.Context, in struct {
//		Data string `json:"data" jsonschema:"the text to hash"`
//	}) (string, error) {
//		sum := sha256.Sum256([]byte(in.Data))
//		return hex.EncodeToString(sum[:]), nil
//	}, host.Cost(wire.CostEstimate{CPU: wire.CostLow, LatencyMS: 1}))
//	err = h.Serve(ctx) // until ctx ends
//
// # How a call flows
//
//	listener (endpoint) ─► jsonrpc.Server (framing, limits, TS-01 gate)
//	   ─► Host.Assign: one atomic load of the current table
//	        ├─ built-ins: capabilities.list / identity.get answer pre-encoded
//	        │  bytes inline; health.* answer from memory
//	        ├─ capability (domain.op): drain guard ─► CHP boundary
//	        │     (synthesized envelope, correlation and trace context
//	        │      from params._meta, a span with Config.Tracer,
//	        │      gate pipeline incl. input schema, handler, evidence made
//	        │      durable) ─► result, or a JSON-RPC error carrying the
//	        │      InvocationResult
//	        ├─ chp.describe|invoke|replay|verify|export (the CHP binding)
//	        └─ raw handlers (Handle) and mounted assigners (Mount)
//
// A streaming capability (RegisterStream) sends chunks through a *Stream
// before its result: a chp.invoke with mode "stream" receives them as
// chp.chunk notifications (SSE chunk frames on the HTTP binding), a sync
// call only the result (docs/chp-jsonrpc-binding.md "Streaming").
//
// # What is advertised
//
// Everything capabilities.list says is derived from the registration
// table, so it cannot drift from what is answered: methods (every dotted
// method the host answers, built-ins and chp.* included),
// provided_capabilities (grouped by domain), consumed_capabilities
// (Consumes), cost_estimates (Cost), operation_dependencies (Requires),
// protocol, the transports actually bound, transport_security and the
// signed_announcement. The envelope is encoded and signed once per change
// of the table or of the listeners, never per call. The undotted legacy
// aliases (ping, health, status, check) are answered but not advertised,
// since the method list must follow the naming rule.
//
// Method names are checked when they are registered against
// wire.MethodNamePattern,
//
//	^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$
//
// at most 255 bytes, "rpc." reserved: registration fails with an error
// naming the offending segment, never a call.
//
// # Access
//
// Every method but the public ones (health, identity.get,
// capabilities.list) passes the host's access policy (package access,
// docs/access.md): the host's own user on its Unix socket may do
// everything; with keys (Config.CHPHTTP, or CHP_HOST_API_KEY[S]) every
// other caller presents one — X-CHP-Key on HTTP, params._meta.chp_key on
// JSON-RPC — on /jsonrpc as on the CHP routes; without keys the host is
// open to anonymous callers only if it serves TCP or HTTP, and it refuses
// to bind those beyond loopback unless Config.InsecureListen. A call a
// node of the same user routes is judged as the caller the node attests.
//
// # State
//
// The host key (Ed25519, signing the announcement and CHP bundles) lives in
// <state>/keys/<name>.pem, created 0600 on first start; the evidence log in
// <state>/evidence/<name>/; <state> is $XDG_STATE_HOME/capmesh or
// Config.DataDir. Config.Ephemeral keeps both in memory; Config.Key and
// Config.Evidence inject them (the capmesh node injects its own).
// Config.EvidenceURL opens a shared database instead of the log
// (postgres://…, once the program imports evidence/postgres).
package host
