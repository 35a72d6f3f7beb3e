// Package bench holds capmesh's cross-package benchmarks: measurements
// that put capmesh beside the physical limit (a raw socket echo) and beside
// peer libraries in the same run. It has no non-test code; see
// docs/BENCHMARKS.md for the figures and the commands that reproduce them.
//
// It is a module of its own (go.mod here, the root module by a replace
// directive) so that the peer libraries it measures against, jrpc2 and
// sourcegraph/jsonrpc2, stay out of the module graph of every library user
// of capmesh. Run it from this directory: go test . -run '^$' -bench ….
package bench
