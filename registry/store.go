package registry

import (
	"context"
	"log/slog"

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
