// Package boundary is the Capability Host Protocol boundary: every
// invocation of a capability passes through its gate pipeline, leaves
// hash-chained evidence in an evidence.Store, and is durable before the
// result is returned. It holds the pipeline, payload schemas (through
// chp/schema), the evidence sealer and the idempotent-replay cache; the
// rules of gates 6, 7 and 10 (policy, CEL invariants, safety) are package
// governance's, the mandate bookkeeping of gate 5 package mandates', and
// the evidence log's read side package evlog's. The protocol objects and
// hashing it uses are package chp's, and its transports are chp/chphttp
// and chp/chprpc.
//
// Data flow of one call:
//
//	chphttp POST /invoke | chprpc chp.invoke (chp.ParseEnvelope)
//	| chprpc direct domain.op (EnvelopeFromRequest, InvokeCall)
//	  → Boundary.Invoke: key scope → gate 0 idempotent replay → 1 id → 2 resolution
//	    → 3 enabled (skip) → 4 mode → 5 mandate → 6 policy → 7 invariants
//	    → 8 autonomy → 9 input schema → 10 safety → 11 execute → 12 output schema
//	  → each gate's evidence events are sealed into the evidence.Store
//	    (chp-event-hash-v2, per-correlation hash chain, attribution bound
//	    in the event id; seal.go writes stored event, canonical payload,
//	    attribution object and stable object in one pass)
//	  → the result is recorded for idempotent replay (with a durable store, in
//	    the same commit as the evidence, so replay survives a restart)
//	  → Store.Sync: the evidence is durable before the InvocationResult returns.
//
// Governance denials, skips and handler failures are results with evidence,
// never errors; Invoke fails only when evidence could not be recorded.
//
// Gate 5 (mandates.go) verifies a presented mandate with chp.VerifyMandate,
// counts max_invocations and rebinds the subject to the delegate; the
// mandate revocations it honours arrive through AcceptRevocation and live
// in memory or a sidecar file (package mandates), never in the evidence
// store.
//
// Streaming (stream.go): InvokeStream runs the same pipeline with a
// ChunkSink; a capability's StreamHandler sends chunk deltas, which are
// digested (chp-chunk-seq-v1) into execution_completed and recorded for
// replay and Last-Event-ID resume (package streamrec).
//
// Proof (package evlog, embedded in the Boundary): Replay reads a
// correlation in sequence order, Verify recomputes its chain
// (chp.VerifyChain), Export builds a bundle — signed with the host key when
// configured — that chp.VerifyBundle and the upstream verifiers check
// offline; the store heads, the Merkle event log's proofs and received
// witness statements and anchors live there too.
//
// A host embeds it in a few lines:
//
//	b, _ := boundary.New(boundary.Config{HostID: "kv-host", Store: store, Key: key})
//	_ = b.Register(boundary.Capability{Descriptor: chp.CapabilityDescriptor{
//		ID: "kv.get", Version: "1.0.0", Description: "read a key"}, Handler: get})
//	mux.Handle("/", chphttp.Handler(b, opts)) // the normative HTTP binding
//	rpc := chprpc.Handlers(b)                 // chp.describe|invoke|replay|verify|export|revocations|revoke
//	rpc["kv.get"] = chprpc.DirectHandler(b)   // direct calls, same pipeline
package boundary
