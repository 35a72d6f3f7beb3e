package registry

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/capmesh/capmesh/internal/errcatalog"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry/descriptor"
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
// RPC and data {"code": Code, "details": Details}.
type Error struct {
	Code    string
	Message string
	Details map[string]any
	Status  int
	RPC     jsonrpc.Code
}

// Error returns "code: message".
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Refusal words beyond the descriptor ones.
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

var statusByWord = map[string]struct {
	status int
	rpc    jsonrpc.Code
}{
	descriptor.CodeInvalidJSON:         {400, jsonrpc.InvalidParams},
	descriptor.CodeInvalidJSONObject:   {400, jsonrpc.InvalidParams},
	descriptor.CodeInvalid:             {422, jsonrpc.InvalidParams},
	descriptor.CodeSignatureRequired:   {401, CodeUnauthorized},
	descriptor.CodeInvalidSignature:    {401, CodeUnauthorized},
	descriptor.CodeExpired:             {400, jsonrpc.InvalidParams},
	descriptor.CodeNotYetValid:         {400, jsonrpc.InvalidParams},
	descriptor.CodeNetworkMismatch:     {400, jsonrpc.InvalidParams},
	descriptor.CodeNoActiveCertificate: {403, CodeForbidden},
	descriptor.CodeKeyRevoked:          {403, CodeForbidden},
	descriptor.CodeRollback:            {409, CodeConflict},
	CodeWordReplay:                     {409, CodeConflict},
	CodeWordConcurrentChange:           {409, CodeConflict},
	CodeWordStoreUnavailable:           {503, CodeUnavailable},
	CodeWordNotRegistered:              {404, CodeNotFound},
	CodeWordUnsignedRemote:             {401, CodeUnauthorized},
	CodeWordForeignUser:                {403, CodeForbidden},
	CodeWordIdentityProbe:              {403, CodeForbidden},
	CodeWordIdentityMismatch:           {403, CodeForbidden},
	CodeWordInvalidParams:              {400, jsonrpc.InvalidParams},
	CodeWordNoProvider:                 {404, CodeNotFound},
	CodeWordCompacted:                  {410, CodeCompacted},
	CodeWordHopLimit:                   {508, CodeHopLimit},
	CodeWordNameInUse:                  {409, CodeConflict},
	CodeWordNotRegistrant:              {403, CodeForbidden},
	CodeWordSelfRoute:                  {400, jsonrpc.InvalidParams},
	CodeWordLocalEndpoint:              {403, CodeForbidden},
}

func refuse(word, format string, args ...any) *Error {
	e := &Error{Code: word, Message: fmt.Sprintf(format, args...), Status: 400, RPC: jsonrpc.InvalidParams}
	if m, ok := statusByWord[word]; ok {
		e.Status, e.RPC = m.status, m.rpc
	}
	return e
}

func withStatus(word string, status int, rpc jsonrpc.Code, format string, args ...any) *Error {
	return &Error{Code: word, Message: fmt.Sprintf(format, args...), Status: status, RPC: rpc}
}

// asError turns a descriptor error (or any error) into an *Error.
func asError(err error) *Error {
	var re *Error
	if errors.As(err, &re) {
		return re
	}
	var de *descriptor.Error
	if errors.As(err, &de) {
		e := refuse(de.Code, "%s", de.Message)
		e.Details = de.Details
		return e
	}
	return withStatus("internal_server_error", http.StatusInternalServerError, jsonrpc.InternalError, "%v", err)
}

// rpcError renders err for the JSON-RPC binding.
func rpcError(err error) error {
	if err == nil {
		return nil
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je
	}
	e := asError(err)
	data := map[string]any{"code": e.Code}
	if len(e.Details) > 0 {
		data["details"] = e.Details
	}
	return jsonrpc.Errorf(e.RPC, "%s", e.Message).WithData(data)
}

// Refuse returns the refusal word with the HTTP status and JSON-RPC code
// the registry gives it (400 and -32602 for a word it does not list), for
// the bindings of package registry/api.
func Refuse(word, format string, args ...any) *Error { return refuse(word, format, args...) }

// RefuseWithStatus returns the refusal word with the given HTTP status and
// JSON-RPC code.
func RefuseWithStatus(word string, status int, rpc jsonrpc.Code, format string, args ...any) *Error {
	return withStatus(word, status, rpc, format, args...)
}

// AsError turns a registry or descriptor error (or any error, as a 500)
// into an *Error.
func AsError(err error) *Error { return asError(err) }

// RPCError renders err for the JSON-RPC binding: a *jsonrpc.Error as it
// is, anything else as its Error's code with {"code": word, "details"}.
func RPCError(err error) error { return rpcError(err) }
