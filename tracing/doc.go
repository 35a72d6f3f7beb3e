// Package tracing carries W3C trace context through capmesh without
// linking a tracing SDK: the traceparent parser and printer, the span
// context a call's context.Context carries, the hook a tracer implements,
// and a slog.Handler that stamps every log line of a call with its
// trace id.
//
// The lower packages (jsonrpc, chp/boundary, registry, host) know only
// this package, as they know only their metrics observers: a Tracer in
// their Config starts spans, a nil one costs a nil check. Package
// telemetry implements Tracer with OpenTelemetry and exports over OTLP;
// a program opts in by handing that Tracer to its Config (package node
// does when OTEL_EXPORTER_OTLP_ENDPOINT is set).
//
// Across hops the context travels in the request's params, as the W3C
// traceparent string in params._meta.traceparent (MetaKey):
//
//	client ── {"_meta":{"traceparent":"00-<trace>-<span>-01"}, …} ──▶ node
//	node router: span "capmesh.route", child of the caller's span;
//	  forwards with _meta.traceparent = its own span            ──▶ host
//	host: span "capmesh.host.dispatch", child of the router's
//	  boundary: span "chp.invoke", one child span per CHP gate
//	  ("chp.gate.<name>") and per evidence append
//	  ("chp.evidence.append"); the trace id is recorded in the
//	  evidence as correlation.trace_id when the envelope has none.
//
// A node without a Tracer forwards _meta.traceparent untouched, and a host
// without one still records the caller's trace id in its evidence and
// logs it: propagation costs nothing when nobody traces. A trace id is
// correlation only — a caller's claim, never verified and never an
// authority for anything.
package tracing
