package registry

import (
	"context"
	"errors"
	"time"
)

// A SharedStore is a Store that several nodes write at once (registry/etcd):
// every node keeps its in-memory index fed by the store's change feed, so
// that reads stay local while a change made on one node (a registration,
// a revocation, an enrolment, a CRL) takes effect on every node. Writes
// are conditional on the revisions the node last saw (compare-and-swap),
// so two nodes racing on one record cannot both win; the loser gets
// CodeWordConcurrentChange and retries. Revisions are the store's, shared
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

// kindWhy records why a registration was deleted (deregistered, revoked,
// expired by its owner), written in the deletion's own transaction so
// that every node reports the same event; a deletion without one is an
// expiry by the store's lease.
const kindWhy = "why"

// farFuture is the ExpiresAt of another node's local registration: it
// lives as long as that node's lease, which the store ends.
var farFuture = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
