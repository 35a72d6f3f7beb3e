// Package evidencecmd holds `capmesh evidence`: replay, export and verify
// the CHP evidence of any host over its HTTP or JSON-RPC binding (the
// bundle re-verified offline with chp.VerifyBundle, the verdict printed by
// printVerdict), the witnessing commands (witness, prove, consistency) and
// monitor, which keeps signed tree heads across runs and reports forks.
// `evidence check`, the offline check of a local store, is added by
// package main.
package evidencecmd
