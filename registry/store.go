package registry

import (
	"context"
	"log/slog"
	"time"

	"github.com/capmesh/capmesh/registry/store"
)

// The storage contract is package registry/store; these are its names as
// the registry has always exported them.
type (
	// Record is one durable registry entry (store.Record).
	Record = store.Record
	// Op is one write of an atomic Apply (store.Op).
	Op = store.Op
	// Store is the registry's durable state (store.Store). Every
	// implementation must pass registry/storetest.
	Store = store.Store
	// MemStore is an in-memory Store (store.MemStore).
	MemStore = store.MemStore
	// SharedStore is a Store several nodes write at once (store.SharedStore).
	SharedStore = store.SharedStore
	// Cond is a condition of SharedStore.ApplyIf (store.Cond).
	Cond = store.Cond
	// Change is one record written or deleted (store.Change).
	Change = store.Change
	// StoreOpener opens the store a URL names (store.Opener).
	StoreOpener = store.Opener
)

// Errors of a SharedStore (store.ErrConflict, …; test with errors.Is).
var (
	ErrConflict    = store.ErrConflict
	ErrCompacted   = store.ErrCompacted
	ErrUnavailable = store.ErrUnavailable
)

// NewMemStore returns an empty in-memory Store.
func NewMemStore() *MemStore { return store.NewMemStore() }

// RegisterStore makes OpenStoreURL open URLs of scheme with open
// (store.Register).
func RegisterStore(scheme string, open StoreOpener) { store.Register(scheme, open) }

// OpenStoreURL opens the registry store url names (store.OpenURL).
func OpenStoreURL(ctx context.Context, url string, log *slog.Logger) (Store, error) {
	return store.OpenURL(ctx, url, log)
}

// kindWhy records why a registration was deleted (deregistered, revoked,
// expired by its owner), written in the deletion's own transaction so
// that every node reports the same event; a deletion without one is an
// expiry by the store's lease.
const kindWhy = "why"

// farFuture is the ExpiresAt of another node's local registration: it
// lives as long as that node's lease, which the store ends.
var farFuture = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
