// Package bench holds capmesh's cross-package benchmarks: measurements
// that put capmesh beside the physical limit (a raw socket echo) and beside
// peer libraries in the same run. It has no non-test code; see
// docs/BENCHMARKS.md for the figures and the commands that reproduce them.
package bench
