// Package refusal is the registry's refusal: the Error a check returns,
// with the reference's word, its HTTP status and its JSON-RPC code, and
// the table that gives each word its status and code. Package registry
// exports Error (a type alias) and the words; the registry's internal
// packages return its refusals directly, so that a check can move out of
// the Node without changing what a client receives.
package refusal

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/capmesh/capmesh/internal/errcatalog"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/store"
)

// Error is a registry refusal. Code is the reference's word (see
// descriptor.Code* and the words below); the HTTP binding sends it as
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

// Refusal words beyond the descriptor ones (package registry exports each
// as CodeWord<Name>).
const (
	NotRegistered    = "agent_not_registered"
	UnsignedRemote   = "signature_required_for_remote_peer"
	ForeignUser      = "peer_is_another_user"
	IdentityProbe    = "identity_probe_failed"
	IdentityMismatch = "identity_mismatch"
	InvalidParams    = "invalid_params"
	NoProvider       = "no_provider"
	Compacted        = "watch_compacted"
	Replay           = "replay_detected"
	// A shared store (registry/etcd): another node won a race on the same
	// record, or the store is unreachable; both are worth a retry.
	ConcurrentChange = "concurrent_change"
	StoreUnavailable = "registry_store_unavailable"
	// The registration binding (docs/routing.md).
	NameInUse     = "name_in_use"
	NotRegistrant = "not_the_registrant"
	// The loop protection, and the local-only endpoint checks.
	HopLimit      = "hop_limit_exceeded"
	SelfRoute     = "endpoint_is_this_node"
	LocalEndpoint = "endpoint_is_local"
)

var statusByWord = map[string]struct {
	status int
	rpc    jsonrpc.Code
}{
	descriptor.CodeInvalidJSON:         {400, jsonrpc.InvalidParams},
	descriptor.CodeInvalidJSONObject:   {400, jsonrpc.InvalidParams},
	descriptor.CodeInvalid:             {422, jsonrpc.InvalidParams},
	descriptor.CodeSignatureRequired:   {401, errcatalog.Unauthorized},
	descriptor.CodeInvalidSignature:    {401, errcatalog.Unauthorized},
	descriptor.CodeExpired:             {400, jsonrpc.InvalidParams},
	descriptor.CodeNotYetValid:         {400, jsonrpc.InvalidParams},
	descriptor.CodeNetworkMismatch:     {400, jsonrpc.InvalidParams},
	descriptor.CodeNoActiveCertificate: {403, errcatalog.Forbidden},
	descriptor.CodeKeyRevoked:          {403, errcatalog.Forbidden},
	descriptor.CodeRollback:            {409, errcatalog.Conflict},
	Replay:                             {409, errcatalog.Conflict},
	ConcurrentChange:                   {409, errcatalog.Conflict},
	StoreUnavailable:                   {503, errcatalog.Unavailable},
	NotRegistered:                      {404, errcatalog.NotFound},
	UnsignedRemote:                     {401, errcatalog.Unauthorized},
	ForeignUser:                        {403, errcatalog.Forbidden},
	IdentityProbe:                      {403, errcatalog.Forbidden},
	IdentityMismatch:                   {403, errcatalog.Forbidden},
	InvalidParams:                      {400, jsonrpc.InvalidParams},
	NoProvider:                         {404, errcatalog.NotFound},
	Compacted:                          {410, errcatalog.Compacted},
	HopLimit:                           {508, errcatalog.HopLimitExceeded},
	NameInUse:                          {409, errcatalog.Conflict},
	NotRegistrant:                      {403, errcatalog.Forbidden},
	SelfRoute:                          {400, jsonrpc.InvalidParams},
	LocalEndpoint:                      {403, errcatalog.Forbidden},
}

// New returns the refusal word with the HTTP status and JSON-RPC code the
// registry gives it (400 and -32602 for a word the table does not list).
func New(word, format string, args ...any) *Error {
	e := &Error{Code: word, Message: fmt.Sprintf(format, args...), Status: 400, RPC: jsonrpc.InvalidParams}
	if m, ok := statusByWord[word]; ok {
		e.Status, e.RPC = m.status, m.rpc
	}
	return e
}

// WithStatus returns the refusal word with the given HTTP status and
// JSON-RPC code.
func WithStatus(word string, status int, rpc jsonrpc.Code, format string, args ...any) *Error {
	return &Error{Code: word, Message: fmt.Sprintf(format, args...), Status: status, RPC: rpc}
}

// Is reports whether err is a refusal with the word.
func Is(err error, word string) bool {
	var re *Error
	return errors.As(err, &re) && re.Code == word
}

// As turns a descriptor error (or any error, as a 500) into an *Error.
func As(err error) *Error {
	var re *Error
	if errors.As(err, &re) {
		return re
	}
	var de *descriptor.Error
	if errors.As(err, &de) {
		e := New(de.Code, "%s", de.Message)
		e.Details = de.Details
		return e
	}
	return WithStatus("internal_server_error", http.StatusInternalServerError, jsonrpc.InternalError, "%v", err)
}

// RPC renders err for the JSON-RPC binding: a *jsonrpc.Error as it is,
// anything else as its Error's code with {"code": word, "details"}.
func RPC(err error) error {
	if err == nil {
		return nil
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je
	}
	e := As(err)
	data := map[string]any{"code": e.Code}
	if len(e.Details) > 0 {
		data["details"] = e.Details
	}
	return jsonrpc.Errorf(e.RPC, "%s", e.Message).WithData(data)
}

// Store turns a SharedStore error into the registry's refusal: a lost race
// is ConcurrentChange, an unreachable store StoreUnavailable (both worth a
// retry); any other error is returned as it is.
func Store(err error) error {
	switch {
	case errors.Is(err, store.ErrConflict):
		return New(ConcurrentChange, "the registry changed on another node while this request was checked; retry it")
	case errors.Is(err, store.ErrUnavailable):
		return New(StoreUnavailable, "the registry store cannot be reached; the change may or may not be stored, retry it (%v)", err)
	}
	return err
}
