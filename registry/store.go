package registry

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Record is one durable registry entry. The registry keeps typed indexes
// in memory and writes each change through a Store as a Record; the Store
// is what survives a restart.
type Record struct {
	// Kind groups records: descriptor, local, cert, invite, crl, nonce, meta.
	Kind string
	// Key is unique within Kind.
	Key string
	// Value is opaque to the store (JSON written by the registry).
	Value []byte
	// ExpiresAt, when not zero, is the instant from which the record is
	// dead: List never returns it and Purge deletes it.
	ExpiresAt time.Time
}

// Op is one write in an atomic Apply: a Put when Delete is false, else a
// delete of (Kind, Key).
type Op struct {
	Record
	Delete bool
}

// Store is the registry's durable state, declared here where it is
// consumed. Implementations: NewMemStore (tests, ephemeral nodes),
// registry/sqlite (the embedded default). Every implementation must pass
// registry/storetest.
type Store interface {
	// Apply performs ops atomically, in order.
	Apply(ctx context.Context, ops ...Op) error
	// List returns the records of kind that are not expired at now, in key
	// order.
	List(ctx context.Context, kind string, now time.Time) ([]Record, error)
	// Purge deletes every record expired at now and returns how many.
	Purge(ctx context.Context, now time.Time) (int, error)
	// Close releases the store.
	Close() error
}

// MemStore is an in-memory Store.
type MemStore struct {
	mu   sync.Mutex
	data map[string]map[string]Record
}

// NewMemStore returns an empty in-memory Store.
func NewMemStore() *MemStore { return &MemStore{data: map[string]map[string]Record{}} }

// Apply implements Store.
func (m *MemStore) Apply(ctx context.Context, ops ...Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, op := range ops {
		kind := m.data[op.Kind]
		if op.Delete {
			delete(kind, op.Key)
			continue
		}
		if kind == nil {
			kind = map[string]Record{}
			m.data[op.Kind] = kind
		}
		r := op.Record
		r.Value = append([]byte(nil), r.Value...)
		kind[op.Key] = r
	}
	return nil
}

// List implements Store.
func (m *MemStore) List(ctx context.Context, kind string, now time.Time) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Record
	for _, r := range m.data[kind] {
		if !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt) {
			continue
		}
		r.Value = append([]byte(nil), r.Value...)
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Purge implements Store.
func (m *MemStore) Purge(ctx context.Context, now time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, kind := range m.data {
		for k, r := range kind {
			if !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt) {
				delete(kind, k)
				n++
			}
		}
	}
	return n, nil
}

// Close implements Store.
func (m *MemStore) Close() error { return nil }
