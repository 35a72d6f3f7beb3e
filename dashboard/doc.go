// Package dashboard is capmesh's web UI: server-rendered pages over a
// node's public surfaces, mounted by the node at /ui on its HTTP listener
// and served by `capmesh dashboard --node URL` against any node.
//
// Pages:
//
//	/ui/          the registry, live: providers, capabilities, trust verdict
//	              and expiry, refreshed without reload (Server-Sent Events at
//	              /ui/events, fed by the node's ipc.watch)
//	/ui/trust     join certificates and the certificate revocation list
//	/ui/evidence  an evidence timeline per correlation, its chain verified
//	              step by step by the dashboard itself (chp.VerifyBundle on
//	              the node's chp.export), beside the node's own chp.verify
//	/ui/audit     the machine-wide audit matrix (package conformance)
//	/ui/compose   the composition graph: who provides and consumes what
//	/ui/login     the operator presents a key; a session cookie carries it
//
// Everything the dashboard shows it reads from the node over the node's
// JSON-RPC HTTP bridge (POST /jsonrpc), presenting the signed-in
// operator's key as X-CHP-Key, so the node's access layer decides what
// the browser may see exactly as it decides for any HTTP caller; each
// route also declares its access.Op and passes access.Policy.Authorize
// first (Routes lists them). The dashboard writes nothing to the node.
//
// The pages are html/template (contextual escaping: provider names,
// capabilities and evidence are attacker-controlled), with one small
// script and one stylesheet embedded with embed; no CDN, no Node
// toolchain. A strict Content-Security-Policy (script-src 'self') keeps a
// script that escaped escaping from running anyway.
package dashboard
