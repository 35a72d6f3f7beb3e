// Package errcatalog is capmesh's catalog of JSON-RPC error codes: one
// data file, errors.json, from which the code constants (catalog_gen.go)
// and the table of docs/errors.md are generated. Every code a capmesh
// package sends is a constant here, and no code has two meanings: the
// packages that send one (jsonrpc, registry, host, chp/chprpc) declare
// their constants as these.
//
// To add or change a code, edit errors.json and run go generate in this
// directory; a test fails while the generated files are stale, and another
// when a code literal in the module is missing from the catalog.
package errcatalog

//go:generate go run ./gen -in errors.json -go catalog_gen.go -md ../../docs/errors.md

// Retry says whether repeating a call that got a code can help.
type Retry string

// The Retry values.
const (
	// RetryNo: the same call gets the same answer.
	RetryNo Retry = "no"
	// RetryLater: the condition is transient; retry after a backoff, or on
	// another provider.
	RetryLater Retry = "later"
	// RetryData: the error's data says (a CHP InvocationResult with its
	// retryable flag).
	RetryData Retry = "data"
)

// Entry is one code of the catalog.
type Entry struct {
	Code       int
	Name       string // the Go constant
	Title      string // the message's leading words ("Server busy")
	Word       string // snake_case word for logs and error.data
	Meaning    string
	HTTPStatus int // the status an HTTP route answers for the condition
	Retry      Retry
	Owners     []string // the packages that send it
}

// Lookup returns the entry of code.
func Lookup(code int) (Entry, bool) {
	for _, e := range Entries {
		if e.Code == code {
			return e, true
		}
	}
	return Entry{}, false
}
