package jsonrpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/capmesh/capmesh/internal/errcatalog"
)

// Code is a JSON-RPC 2.0 error code. A Code is itself an error, so a handler
// may return jsonrpc.InvalidParams directly, and errors.Is(err,
// jsonrpc.InvalidParams) is true for any error that carries that code.
//
// Reserved ranges (JSON-RPC 2.0 §5.1): -32768..-32000 belong to the
// protocol; -32099..-32000 are "server error" codes an implementation may
// define (capmesh uses ServiceDraining, ServerBusy and ResponseTooLarge
// there). Every code capmesh sends is in the error catalog
// (internal/errcatalog, docs/errors.md). Everything else is free for
// applications.
type Code int32

// The codes of the JSON-RPC 2.0 specification, and the server-defined codes
// capmesh emits.
const (
	ParseError     Code = errcatalog.ParseError     // invalid JSON was received
	InvalidRequest Code = errcatalog.InvalidRequest // the JSON sent is not a valid Request object
	MethodNotFound Code = errcatalog.MethodNotFound // the method does not exist / is not available
	InvalidParams  Code = errcatalog.InvalidParams  // invalid method parameter(s)
	InternalError  Code = errcatalog.InternalError  // internal JSON-RPC error

	// ServiceDraining answers calls that arrive after a host began draining
	// (Capability Wire Standard GD-01: -32000 "Service draining").
	ServiceDraining Code = errcatalog.ServiceDraining
	// ServerBusy answers a connection beyond the server's connection
	// budget (MaxConns, OwnerReserve); retry after a backoff.
	ServerBusy Code = errcatalog.ServerBusy
	// ResponseTooLarge answers a call whose reply would exceed the
	// connection's MaxReplyBytes.
	ResponseTooLarge Code = errcatalog.ResponseTooLarge
)

// codeText names the codes this package sends, as the catalog words them.
var codeText = func() map[Code]string {
	m := map[Code]string{}
	for _, e := range errcatalog.Entries {
		if slices.Contains(e.Owners, "jsonrpc") {
			m[Code(e.Code)] = e.Title
		}
	}
	return m
}()

// String returns the specification's name for the code ("Invalid params"),
// or "error <n>" for a code it does not name.
func (c Code) String() string {
	if s, ok := codeText[c]; ok {
		return s
	}
	return "error " + strconv.Itoa(int(c))
}

// Error makes a Code usable as an error whose message is its name.
func (c Code) Error() string { return c.String() }

// IsReserved reports whether c lies in the range the JSON-RPC 2.0
// specification reserves for pre-defined errors (-32768..-32000).
func (c Code) IsReserved() bool { return c >= -32768 && c <= -32000 }

// Error is the error object of a JSON-RPC response. It is also the error a
// Client returns when the server answered with an error, and the error a
// Handler returns to choose the code and data of its reply.
type Error struct {
	Code    Code            `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error formats the error as "<message> (code <n>)".
func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = e.Code.String()
	}
	return fmt.Sprintf("%s (code %d)", msg, int(e.Code))
}

// Is reports whether target is the same code: a Code equal to e.Code, or an
// *Error with the same Code.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Code:
		return e.Code == t
	case *Error:
		return t != nil && e.Code == t.Code
	}
	return false
}

// WithData returns a copy of e whose data member is v marshalled to JSON
// (json.RawMessage is used as is). If v cannot be marshalled the copy has no
// data.
func (e *Error) WithData(v any) *Error {
	c := *e
	switch d := v.(type) {
	case json.RawMessage:
		c.Data = d
	default:
		b, err := json.Marshal(v)
		if err == nil {
			c.Data = b
		}
	}
	return &c
}

// ErrorCode returns the JSON-RPC code err carries: the Code of an *Error or a
// Code anywhere in its chain.
func ErrorCode(err error) (Code, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Code, true
	}
	var c Code
	if errors.As(err, &c) {
		return c, true
	}
	return 0, false
}

// asError converts any handler error into the *Error sent on the wire: an
// *Error or Code keeps its code; anything else becomes InternalError with
// the error's text as message.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		if e.Message == "" {
			c := *e
			c.Message = e.Code.String()
			return &c
		}
		return e
	}
	var c Code
	if errors.As(err, &c) {
		return &Error{Code: c, Message: c.String()}
	}
	return &Error{Code: InternalError, Message: err.Error()}
}
