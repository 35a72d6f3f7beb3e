// Package conformance is the audit of capmesh: it judges any host, over the
// real wire, against the five specifications capmesh implements, and says
// for every requirement whether it passed, failed (and why), or could not
// be observed.
//
// The suites, each named after the text it checks:
//
//   - wire: the Capability Wire Standard audit checklist (Levels 1-3),
//     computed by package wire from live observations: capabilities.list,
//     identity.get, the health triad and a call to every advertised method;
//     plus the signed announcement (valid, invalid, absent, forgeable
//     seed-derived key), transport_security truthfulness and health shapes.
//   - ipc: the Primal IPC Protocol v3.1 compliance checklist: newline
//     JSON-RPC 2.0 framing and error codes (data-driven cases, package
//     conformance/framing), socket location and name, capability-domain
//     symlink and socket mode.
//   - chp: the nine conformance requirements of CHP v0.1 §11 over the HTTP
//     binding or capmesh's JSON-RPC binding, with the evidence chain verified
//     offline from the exported bundle.
//   - rfc005: the verification rules of RFC-005 on every descriptor a
//     registry serves (signature, TTL, trust verdicts).
//
// Data flow:
//
//	endpoint.Address ──Audit──▶ dial (connect timeout) ─▶ wire.Inspect ─┐
//	                                                     framing cases ─┤
//	                                            socket stat / symlinks ─┼─▶ HostReport{Checks}
//	                                chp.describe|GET /host ─▶ invoke… ─┤
//	                                        ipc.list|GET /agents ─────┘
//	biomeos dir ──Discover──▶ []Socket ──AuditAll (concurrent)──▶ MachineReport ─▶ table | JSON | JUnit
//
// Nothing a host says about itself is taken on trust when it can be checked:
// advertised methods are called, the announcement signature is verified,
// the claimed transport security is compared with what the socket does,
// and CHP evidence is re-verified from the exported bundle.
package conformance
