// Package chprpc is capmesh's JSON-RPC binding of the Capability Host
// Protocol (docs/chp-jsonrpc-binding.md) over a chp/boundary.Boundary: the
// chp.* methods carrying exactly the objects of the HTTP binding, and direct
// calls of capability methods (kv.get) through the same pipeline.
//
// Data flow:
//
//	chp.describe | chp.invoke | chp.replay | chp.verify | chp.export (Handlers)
//	  → params decoded (chp.ParseEnvelope for chp.invoke; InvalidParams when bad)
//	  → a Unix-socket peer bound as the verified caller ("uid:<n>")
//	  → Boundary.Invoke | Replay | Verify | Export → result; JSON-RPC errors
//	    only for bad params and for evidence that could not be recorded
//
//	direct kv.get (DirectHandler)
//	  → EnvelopeFromRequest (params without _meta = payload; correlation,
//	    invocation_id and version from params._meta)
//	  → Boundary.InvokeCall → Reply: success → the handler's data; denied,
//	    failed, skipped, indeterminate → a JSON-RPC error (CodeDenied …) whose
//	    data is the whole InvocationResult.
//
//	m := chprpc.Handlers(b)
//	m["kv.get"] = chprpc.DirectHandler(b)
package chprpc
