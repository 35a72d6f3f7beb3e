package refusal

import (
	"errors"
	"fmt"
	"testing"

	"github.com/capmesh/capmesh/internal/errcatalog"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/store"
)

// TestNewStatusByWord: a listed word gets its HTTP status and JSON-RPC
// code from the table, any other word 400 and -32602.
func TestNewStatusByWord(t *testing.T) {
	for _, c := range []struct {
		word   string
		status int
		rpc    jsonrpc.Code
	}{
		{descriptor.CodeRollback, 409, errcatalog.Conflict},
		{NotRegistered, 404, errcatalog.NotFound},
		{HopLimit, 508, errcatalog.HopLimitExceeded},
		{StoreUnavailable, 503, errcatalog.Unavailable},
		{"some_other_word", 400, jsonrpc.InvalidParams},
	} {
		e := New(c.word, "x %d", 1)
		if e.Status != c.status || e.RPC != c.rpc || e.Message != "x 1" || e.Error() != c.word+": x 1" {
			t.Errorf("New(%s) = %+v, want %d %d", c.word, e, c.status, c.rpc)
		}
	}
}

// TestStore: a SharedStore's conflict and unavailability, wrapped or
// not, become the retryable refusals; any other error stays as it is.
func TestStore(t *testing.T) {
	if !Is(Store(fmt.Errorf("put: %w", store.ErrConflict)), ConcurrentChange) {
		t.Error("a conflict is not concurrent_change")
	}
	if e := As(Store(store.ErrUnavailable)); e.Code != StoreUnavailable || e.Status != 503 {
		t.Errorf("unavailable: %+v", e)
	}
	other := errors.New("disk on fire")
	if Store(other) != other {
		t.Error("another error was changed")
	}
}

// TestAsAndRPC: a descriptor error keeps its word and details; any other
// error is a 500; RPC carries the word in error.data.
func TestAsAndRPC(t *testing.T) {
	de := &descriptor.Error{Code: descriptor.CodeExpired, Message: "late", Details: map[string]any{"by": 1}}
	e := As(fmt.Errorf("wrapped: %w", de))
	if e.Code != descriptor.CodeExpired || e.Status != 400 || e.Details["by"] != 1 {
		t.Errorf("As(descriptor error) = %+v", e)
	}
	if e := As(errors.New("boom")); e.Status != 500 || e.RPC != jsonrpc.InternalError {
		t.Errorf("As(other) = %+v", e)
	}
	var je *jsonrpc.Error
	if err := RPC(New(Replay, "again")); !errors.As(err, &je) || je.Code != errcatalog.Conflict {
		t.Fatalf("RPC = %v", err)
	}
	if RPC(nil) != nil {
		t.Error("RPC(nil) is not nil")
	}
}
