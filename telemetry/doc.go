// Package telemetry exposes a node's or a host's metrics in the Prometheus
// format, on a private prometheus.Registry (never the global one).
//
// The lower packages know nothing of Prometheus: each offers a small
// observer interface — jsonrpc.Observer (requests, in-flight handlers,
// connections, limit refusals), boundary.Observer (CHP outcomes, denial
// codes, evidence commits) and registry.Observer (changes, trust changes,
// routed calls, store errors) — and Metrics implements them with
// client_golang collectors. A nil observer costs a nil check, so the host
// library, which must not link Prometheus, pays nothing for it.
//
// A node (package node) always serves the exposition at /metrics on its
// HTTP listener. A host program opts in by handing the observers to its
// Config and mounting the handler:
//
//	m := telemetry.New(telemetry.Options{})
//	cfg := &host.Config{HTTP: "127.0.0.1:8080"}
//	cfg.RPC.Observer = m.RPC()
//	cfg.CHP.Observer = m.CHP()
//	h, _ := host.New(info, cfg)
//	_ = h.MountHTTPKeyed("/metrics", m.Handler())
//
// MountHTTPKeyed applies the host's access policy: without keys the
// exposition is served to whoever reaches the HTTP listener (loopback
// only unless Config.InsecureListen), with keys only to requests that
// present one in X-CHP-Key (docs/access.md).
//
// Every label has a bounded set of values. A method is labelled by name
// only when it is registered (Options.Methods) or once a call to it has
// succeeded, and at most Options.MaxMethods names are; every other call —
// unknown methods included — counts under "other". Denial codes outside
// the reserved CHP set are "other" too. Correlation and invocation ids are
// never labels. docs/operations.md lists every series.
//
// Traces: Tracer implements the tracing.Tracer hook with OpenTelemetry.
// TracingFromEnv builds it, exporting over OTLP/HTTP, only when
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is
// set; package node does so itself, a host program opts in:
//
//	tr, err := telemetry.TracingFromEnv(ctx, "kvhost") // nil: tracing off
//	if tr != nil {
//		defer tr.Shutdown(context.Background())
//		cfg.Tracer = tr.Tracer
//	}
//
// docs/operations.md ("Traces and logs") describes the spans and the log
// lines.
package telemetry
