// Package store is the registry node's storage contract: the durable
// records a node writes (Record, Op), the Store that keeps them across
// restarts, the SharedStore that several nodes write at once, and
// MemStore, the in-memory reference implementation. Engines implement it
// (registry/sqlite, registry/etcd) and pass registry/storetest; a program
// enables one by importing it, which registers its URL scheme (Register,
// OpenURL). Package registry re-exports these names.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
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
	// Machine identifies the machine that admitted the record
	// (endpoint.MachineID), when the registry records it: for a
	// registration naming an endpoint that only its own machine reaches
	// (endpoint.LocalOnly), which no node of another machine may dial. It
	// is kept beside Value, never in it (a descriptor's Value is its
	// signed bytes). A SharedStore must keep it and report it in its
	// changes; a store of one node (SQLite) may drop it: every record it
	// holds was admitted on its machine.
	Machine string
}

// Op is one write in an atomic Apply: a Put when Delete is false, else a
// delete of (Kind, Key).
type Op struct {
	Record
	Delete bool
}

// Store is the registry's durable state. Implementations: NewMemStore (tests, ephemeral nodes),
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

// A SharedStore is a Store that several nodes write at once (registry/etcd):
// every node keeps its in-memory index fed by the store's change feed, so
// that reads stay local while a change made on one node (a registration,
// a revocation, an enrolment, a CRL) takes effect on every node. Writes
// are conditional on the revisions the node last saw (compare-and-swap),
// so two nodes racing on one record cannot both win; the loser gets
// the registry's CodeWordConcurrentChange and retries. Revisions are the store's, shared
// by all nodes and valid across restarts: ipc.watch cursors are store
// revisions.
//
// Local (unsigned) registrations belong to the node they were made on
// (NodeID): the store keeps them alive with the node, not by their TTL,
// so that a heartbeat touches only the node's memory and a dead node's
// registrations vanish with it.
type SharedStore interface {
	Store
	// NodeID names this node among the store's writers.
	NodeID() string
	// ApplyIf performs ops atomically if every cond holds, and returns the
	// store revision of the write; ErrConflict when a cond fails.
	ApplyIf(ctx context.Context, conds []Cond, ops ...Op) (uint64, error)
	// Snapshot returns every record (expired or not, of every kind) with
	// the revision it was last written at, and the store revision the
	// snapshot is consistent at.
	Snapshot(ctx context.Context) (uint64, []Change, error)
	// Follow calls fn with the changes of each revision after rev, in
	// order, until ctx ends (nil) or the feed fails. A rev whose history
	// is gone is ErrCompacted.
	Follow(ctx context.Context, after uint64, fn func([]Change)) error
	// History returns the changes of the revisions in (after, upto], with
	// the previous record of each; ErrCompacted when they are gone.
	History(ctx context.Context, after, upto uint64) ([]Change, error)
	// Caught returns once Follow has delivered (its fn returned) every
	// change the store held when Caught was called, or ctx ended.
	Caught(ctx context.Context) error
}

// Cond is a condition of SharedStore.ApplyIf on one record.
type Cond struct {
	Kind, Key string
	// Rev is the revision the record was last written at; 0: the record
	// must not exist.
	Rev uint64
	// Present, instead of Rev, only requires the record to exist.
	Present bool
}

// Change is one record written or deleted, as a SharedStore reports it.
type Change struct {
	Op
	// Revision is the store revision of the change.
	Revision uint64
	// Node is the writer of a local registration (kind "local"): its
	// owner, whose lease keeps it alive.
	Node string
	// Created says that a put created the record (there was none
	// before it).
	Created bool
	// Prev is the record before the change, when the store reports it
	// (History does; the live feed need not).
	Prev *Record
}

// Errors of a SharedStore (wrapped; test with errors.Is).
var (
	// ErrConflict: a condition of ApplyIf failed — another node changed
	// the record first.
	ErrConflict = errors.New("registry store: changed concurrently by another node")
	// ErrCompacted: the store no longer holds the history asked for.
	ErrCompacted = errors.New("registry store: revision compacted")
	// ErrUnavailable: the store cannot be reached; the write was not
	// made (or its outcome is unknown) and may be retried.
	ErrUnavailable = errors.New("registry store unavailable")
)

// A Opener opens the registry store a URL names, for OpenURL.
type Opener func(ctx context.Context, url string, log *slog.Logger) (Store, error)

var (
	storeOpenersMu sync.RWMutex
	storeOpeners   = map[string]Opener{}
)

// Register makes OpenURL open URLs of scheme ("etcd" for
// etcd://…) with open. A store package registers itself in its init, so
// that a program enables an engine by importing it and the registry
// library stays without its dependencies. Registering a scheme twice
// panics.
func Register(scheme string, open Opener) {
	storeOpenersMu.Lock()
	defer storeOpenersMu.Unlock()
	if _, dup := storeOpeners[scheme]; dup {
		panic("registry: RegisterStore called twice for scheme " + scheme)
	}
	storeOpeners[scheme] = open
}

// OpenURL opens the registry store url names (scheme://…) with the
// opener registered for its scheme.
func OpenURL(ctx context.Context, url string, log *slog.Logger) (Store, error) {
	scheme, _, ok := strings.Cut(url, "://")
	if !ok || scheme == "" {
		return nil, errors.New("registry: want a store URL such as etcd://host:2379")
	}
	storeOpenersMu.RLock()
	open := storeOpeners[scheme]
	known := make([]string, 0, len(storeOpeners))
	for s := range storeOpeners {
		known = append(known, s+"://")
	}
	storeOpenersMu.RUnlock()
	if open == nil {
		slices.Sort(known)
		list := strings.Join(known, ", ")
		if list == "" {
			list = "none"
		}
		return nil, fmt.Errorf("registry: no store for %s:// URLs in this program (it knows %s)", scheme, list)
	}
	if log == nil {
		log = slog.Default()
	}
	return open(ctx, url, log)
}

// Observe wraps s so that onError is told the operation ("apply", "list",
// "purge") of every call that fails, for metrics.
func Observe(s Store, onError func(op string)) Store { return observed{s, onError} }

type observed struct {
	Store
	onError func(op string)
}

func (s observed) Apply(ctx context.Context, ops ...Op) error {
	return s.check("apply", s.Store.Apply(ctx, ops...))
}

func (s observed) List(ctx context.Context, kind string, now time.Time) ([]Record, error) {
	rs, err := s.Store.List(ctx, kind, now)
	return rs, s.check("list", err)
}

func (s observed) Purge(ctx context.Context, now time.Time) (int, error) {
	k, err := s.Store.Purge(ctx, now)
	return k, s.check("purge", err)
}

func (s observed) check(op string, err error) error {
	if err != nil {
		s.onError(op)
	}
	return err
}
