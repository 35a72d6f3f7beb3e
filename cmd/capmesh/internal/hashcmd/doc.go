// Package hashcmd holds `capmesh hash`: the SHA-256 capability fingerprints
// of package fingerprint (object, agent, runtime, invocation, composable
// tools), capability links and their diffs, evaluation, runtime bindings
// and tool references, read from files or stdin with the order-preserving
// reader.
package hashcmd
