// Package chphttp is the normative HTTP binding of the Capability Host
// Protocol (chp-http-binding.md) over a chp/boundary.Boundary.
//
// Data flow of a request:
//
//	HTTP request → route (unknown: 404/405 with the binding's error envelope)
//	  → public routes (/, /health, /.well-known/chp-identity) answer directly
//	  → otherwise X-CHP-Key: shared keys or named, scoped keys, compared in
//	    constant time on digests (401 when configured keys do not match);
//	    a named key binds its caller (boundary.WithCaller)
//	  → X-CHP-Version check (400 version_unsupported)
//	  → body bounded (413) → chp.ParseEnvelope (400 invalid_envelope)
//	  → Boundary.Invoke | Replay | Verify | Export | AcceptRevocation
//	    (POST /revocations: 400 invalid_revocation) | Revocations
//	  → 200 with the CHP object, whatever the invocation's outcome; 404 for
//	    /verify or /export of a correlation without evidence; 500 only when
//	    evidence could not be recorded or read.
//
//	mux.Handle("/", chphttp.Handler(b, &chphttp.Options{NamedKeys: keys}))
package chphttp
