// Package chp implements the Capability Host Protocol boundary: the protocol
// objects (with the upstream JSON Schemas embedded), the governed invocation
// pipeline, evidence hashing, bundles, and the HTTP and JSON-RPC bindings.
//
// Data flow of one call:
//
//	HTTP POST /invoke | JSON-RPC chp.invoke | direct domain.op (EnvelopeFromRequest)
//	  → ParseEnvelope (lenient: defaults filled, correlation generated when missing)
//	  → Boundary.Invoke: key scope → gate 0 idempotent replay → 1 id → 2 resolution
//	    → 3 enabled (skip) → 4 mode → 5 mandate → 6 policy → 7 invariants
//	    → 8 autonomy → 9 input schema → 10 safety → 11 execute → 12 output schema
//	  → each gate's evidence events are sealed into the evidence.Store
//	    (chp-event-hash-v2, per-correlation hash chain, capmesh field binding;
//	    seal.go writes stored event, canonical payload and stable object in one pass)
//	  → the result is recorded for idempotent replay (with a durable store, in
//	    the same commit as the evidence, so replay survives a restart)
//	  → Store.Sync: the evidence is durable before the InvocationResult returns.
//
// JSON-RPC calls arrive on the jsonrpc server's reused worker goroutines,
// whose stacks have already grown to what the pipeline needs.
//
// Proof: Boundary.Replay reads a correlation in sequence order, Verify
// recomputes its chain, Export builds a bundle (signed with the host key when
// configured) that VerifyBundle — and the upstream verifiers — check offline.
//
// A host embeds it in a few lines:
//
//	b, _ := chp.NewBoundary(chp.Config{HostID: "kv-host", Store: store, Key: key})
//	_ = b.Register(chp.Capability{Descriptor: chp.CapabilityDescriptor{
//		ID: "kv.get", Version: "1.0.0", Description: "read a key"}, Handler: get})
//	mux.Handle("/", b.HTTPHandler(opts))      // the normative HTTP binding
//	rpc := b.RPCHandlers()                     // chp.describe|invoke|replay|verify|export
//	rpc["kv.get"] = b.DirectHandler()          // direct calls, same pipeline
package chp
