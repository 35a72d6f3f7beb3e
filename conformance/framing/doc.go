// Package framing holds the data-driven wire checks of the Primal IPC
// Protocol's newline JSON-RPC 2.0 framing: each Case is a txtar file
// (testdata/cases, embedded) of lines to send on a fresh connection and
// the reply patterns expected, matched in any order by Match. Package
// conformance runs them as its ipc suite; our own tests run the same bytes.
//
//	testdata/cases/*.txtar ──Cases / ParseCase──▶ []Case
//	Case ──Run(conn, deadline)──▶ nil | why the replies did not match
package framing
