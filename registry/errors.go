package registry

import (
	"github.com/capmesh/capmesh/internal/errcatalog"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry/internal/refusal"
)

// Registry-specific JSON-RPC codes, in the implementation-defined server
// range, from the error catalog (docs/errors.md). Invalid input uses the
// standard InvalidParams (-32602).
const (
	CodeUnauthorized jsonrpc.Code = errcatalog.Unauthorized // bad or missing signature; unsigned call from a non-local peer
	CodeForbidden    jsonrpc.Code = errcatalog.Forbidden    // trust policy refused (not enrolled, revoked, other user)
	CodeNotFound     jsonrpc.Code = errcatalog.NotFound     // no such registration / provider
	CodeConflict     jsonrpc.Code = errcatalog.Conflict     // an older descriptor (rollback) or a replay
	CodeCompacted    jsonrpc.Code = errcatalog.Compacted    // watch cursor older than the retained history
	CodeUnavailable  jsonrpc.Code = errcatalog.Unavailable  // provider unreachable
)

// Error is a registry refusal. Code is the reference's word (see
// descriptor.Code* and the constants below); the HTTP binding sends it as
// {"error":{"code",...}} with Status, the JSON-RPC binding as an error with
// RPC and data {"code": Code, "details": Details}. Each word's status and
// code are registry/internal/refusal's table.
type Error = refusal.Error

// Refusal words beyond the descriptor ones (registry/internal/refusal
// defines each again, for its table; TestRefusalWordsAgree holds them
// equal).
const (
	CodeWordNotRegistered    = "agent_not_registered"
	CodeWordUnsignedRemote   = "signature_required_for_remote_peer"
	CodeWordForeignUser      = "peer_is_another_user"
	CodeWordIdentityProbe    = "identity_probe_failed"
	CodeWordIdentityMismatch = "identity_mismatch"
	CodeWordInvalidParams    = "invalid_params"
	CodeWordNoProvider       = "no_provider"
	CodeWordCompacted        = "watch_compacted"
	CodeWordReplay           = "replay_detected"
	// A shared store (registry/etcd): another node won a race on the same
	// record, or the store is unreachable; both are worth a retry.
	CodeWordConcurrentChange = "concurrent_change"
	CodeWordStoreUnavailable = "registry_store_unavailable"
)

func refuse(word, format string, args ...any) *Error { return refusal.New(word, format, args...) }

func withStatus(word string, status int, rpc jsonrpc.Code, format string, args ...any) *Error {
	return refusal.WithStatus(word, status, rpc, format, args...)
}

// Refuse returns the refusal word with the HTTP status and JSON-RPC code
// the registry gives it (400 and -32602 for a word it does not list), for
// the bindings of package registry/api.
func Refuse(word, format string, args ...any) *Error { return refusal.New(word, format, args...) }

// RefuseWithStatus returns the refusal word with the given HTTP status and
// JSON-RPC code.
func RefuseWithStatus(word string, status int, rpc jsonrpc.Code, format string, args ...any) *Error {
	return refusal.WithStatus(word, status, rpc, format, args...)
}

// AsError turns a registry or descriptor error (or any error, as a 500)
// into an *Error.
func AsError(err error) *Error { return refusal.As(err) }

// RPCError renders err for the JSON-RPC binding: a *jsonrpc.Error as it
// is, anything else as its Error's code with {"code": word, "details"}.
func RPCError(err error) error { return refusal.RPC(err) }
