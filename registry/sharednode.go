package registry

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/internal/refusal"
	"github.com/capmesh/capmesh/registry/internal/state"
)

// Shared mode (SharedStore): the node follows the store's feed and
// applies the changes of every node to its state (state.Shared has the
// rules); here is the I/O of it: conditional writes, the follow loop,
// resyncs, and the watch history read back from the store.

// apply writes ops to the store: in shared mode conditionally on the
// revisions this node holds of the records they touch, recording the new
// ones. The caller holds wmu. A lost race is CodeWordConcurrentChange, an
// unreachable store CodeWordStoreUnavailable (both retryable).
func (n *Node) apply(ctx context.Context, ops ...Op) error { return n.applyIf(ctx, nil, ops...) }

// applyIf is apply with the extra conditions conds in shared mode.
func (n *Node) applyIf(ctx context.Context, conds []Cond, ops ...Op) error {
	if n.shared == nil {
		return n.st.Apply(ctx, ops...)
	}
	for i, op := range ops {
		if op.Kind == kindLocal && !op.Delete {
			// Kept alive by the node's lease; the TTL is the node's memory.
			ops[i].ExpiresAt = time.Time{}
		}
	}
	rev, err := n.shared.ApplyIf(ctx, n.state.WriteConds(conds, ops), ops...)
	if err != nil {
		return n.storeError(err)
	}
	n.state.Written(ops, rev)
	return nil
}

// commitShared is commit on a SharedStore: the write, with a record of
// why for each deletion; the events come back through the feed.
func (n *Node) commitShared(ctx context.Context, ops []Op, evs []Event) error {
	ops = n.state.Deleting(ops, n.cfg.Skew)
	ops = append(ops, state.WhyOps(evs, n.shared.NodeID(), n.cfg.Now())...)
	err := n.apply(ctx, ops...)
	if err != nil {
		n.state.Undelete(ops)
	}
	return err
}

// snapshotView serves load from a SharedStore's snapshot: List from the
// snapshot, Apply (a key generated on first start) conditionally.
type snapshotView struct {
	*MemStore
	n *Node
}

func (v *snapshotView) Apply(ctx context.Context, ops ...Op) error { return v.n.apply(ctx, ops...) }

// loadShared loads the node from a snapshot of the shared store and
// returns the revision to follow from.
func (n *Node) loadShared(ctx context.Context) error {
	rev, chs, err := n.shared.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("registry: load: %w", err)
	}
	view := &snapshotView{MemStore: NewMemStore(), n: n}
	own, others := n.state.Loading(chs)
	for _, r := range own {
		_ = view.MemStore.Apply(ctx, Op{Record: r})
	}
	st := n.st
	n.st = view
	err = n.load(ctx)
	n.st = st
	if err != nil {
		return err
	}
	n.state.Loaded(others, rev)
	return nil
}

// followLoop feeds the index from the store until ctx ends, resuming
// after errors; a cursor the store no longer holds is a resync from a
// new snapshot.
func (n *Node) followLoop(ctx context.Context) {
	defer close(n.followDone)
	for {
		err := n.shared.Follow(ctx, n.Version(), n.applyChanges)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, ErrCompacted) {
			err = n.resync(ctx)
		}
		if err != nil {
			n.log.Warn("registry: following the shared store", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// applyChanges applies the changes of one store revision and records
// their events.
func (n *Node) applyChanges(chs []Change) {
	if len(chs) == 0 {
		return
	}
	now, why := n.cfg.Now(), state.WhyOf(chs)
	n.wmu.Lock()
	defer n.wmu.Unlock()
	n.state.Prepare(chs) // outside mu: readers go on while it parses
	n.mu.Lock()
	defer n.mu.Unlock()
	var evs []Event
	for _, ch := range chs {
		if ev, ok := n.applyChange(ch, why, now); ok {
			evs = append(evs, ev)
		}
	}
	n.record(evs, chs[0].Revision, now)
}

// applyChange applies one change to the state, logging an unreadable
// record it drops. The caller holds wmu and mu.
func (n *Node) applyChange(ch Change, why map[string]state.WhyRecord, now time.Time) (Event, bool) {
	ev, ok, err := n.state.ApplyChange(ch, why, now)
	if err != nil {
		n.log.Warn("registry: dropping an unreadable shared record", "kind", ch.Kind, "key", ch.Key, "err", err)
	}
	return ev, ok
}

// record appends evs to the watch history at revision rev (shared mode)
// and wakes the watchers. The caller holds mu.
func (n *Node) record(evs []Event, rev uint64, now time.Time) {
	n.observeChanges(evs)
	n.state.Record(evs, rev, now)
	n.wake()
}

// resync rebuilds the index from a new snapshot when the feed's cursor
// was compacted away: every record newer than the index is applied, every
// record the snapshot lacks is dropped, and the watch history restarts at
// the snapshot's revision (older cursors get CodeWordCompacted).
func (n *Node) resync(ctx context.Context) error {
	rev, chs, err := n.shared.Snapshot(ctx)
	if err != nil {
		return err
	}
	now := n.cfg.Now()
	n.wmu.Lock()
	defer n.wmu.Unlock()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ch := range chs {
		n.applyChange(ch, nil, now)
	}
	for _, ch := range n.state.Missing(chs, rev) {
		n.applyChange(ch, nil, now) // unindexes a registration
	}
	n.state.ResetEvents()
	n.state.Resynced(rev)
	n.record(nil, rev, now)
	return nil
}

// sharedHistory is the watch history (since, upto] read back from the
// store, for a cursor older than this node's memory (a restart).
func (n *Node) sharedHistory(ctx context.Context, since, upto uint64) ([]Event, error) {
	chs, err := n.shared.History(ctx, since, upto)
	if err != nil {
		return nil, err
	}
	return n.state.HistoryEvents(chs, n.cfg.Now()), nil
}

// sweepShared removes this node's expired local registrations from the
// shared store (its lease would keep them); descriptors are ended by the
// store's leases, and other nodes' registrations by theirs. The caller
// holds wmu.
func (n *Node) sweepShared(ctx context.Context, dead []*entry) {
	for _, e := range dead {
		if e.Source != SourceLocal {
			continue
		}
		if _, err := n.deregisterLocked(ctx, e.Key, EventExpired, ""); err != nil {
			n.log.Warn("registry: sweep", "err", err)
		}
	}
}

// watchShared answers a watch whose cursor is older than this node's
// memory (it restarted since, or the cursor came from another node): the
// history (since, upto] from the store, then the events in memory. A
// cursor the store compacted away is CodeWordCompacted with the current
// revision, as on any store.
func (n *Node) watchShared(ctx context.Context, since, upto, rev uint64, caps []string) (uint64, []Event, error) {
	hist, err := n.sharedHistory(ctx, since, upto)
	if errors.Is(err, ErrCompacted) {
		e := refuse(CodeWordCompacted, "events before revision %d are no longer retained by the store; re-list and resume from revision %d", since+1, rev)
		e.Details = map[string]any{"revision": rev}
		return rev, nil, e
	}
	if err != nil {
		return rev, nil, refuse(CodeWordStoreUnavailable, "reading the watch history from the store: %v; retry later", err)
	}
	out := state.FilterCaps(hist, caps)
	n.mu.RLock()
	defer n.mu.RUnlock()
	return rev, append(out, n.state.Events(upto, rev, caps)...), nil
}

// registerShared is Register on a SharedStore: the checks under wmu, the
// conditional write without it (so that registrations of different keys
// go to the store side by side), the publication under wmu again unless
// the feed already delivered it.
func (n *Node) registerShared(ctx context.Context, raw []byte, d *descriptor.Descriptor, now time.Time) (Entry, error) {
	n.wmu.Lock()
	e, ops, _, same, err := n.admitLocked(d, raw, now)
	if refusal.Is(err, descriptor.CodeNoActiveCertificate) {
		n.wmu.Unlock() // until the feed delivers what etcd holds: an enrolment made elsewhere?
		cerr := n.shared.Caught(ctx)
		if n.wmu.Lock(); cerr == nil {
			e, ops, _, same, err = n.admitLocked(d, raw, now)
		}
	}
	if same != nil {
		// The same descriptor again: stored still, unless another node
		// deleted or replaced it and the feed has not said so yet.
		v, cond := n.state.View(same, now), n.state.SameCond(same.Key)
		n.wmu.Unlock()
		if _, err := n.shared.ApplyIf(ctx, []Cond{cond}); err != nil {
			return Entry{}, n.storeError(err)
		}
		return v, nil
	} else if err != nil {
		n.wmu.Unlock()
		return Entry{}, err
	}
	conds := n.state.RegisterConds(e.Key)
	ops = n.state.RegisterOps(e, ops, n.cfg.Skew) // the descriptor is its own watermark
	n.wmu.Unlock()
	rev, err := n.shared.ApplyIf(ctx, conds, ops...)
	if err != nil {
		return Entry{}, n.storeError(err)
	}
	n.wmu.Lock()
	defer n.wmu.Unlock()
	if n.state.Registered(e.Key, rev, len(ops) > 1) {
		n.publish(func() {
			n.state.Marks[e.Key] = e.RegisteredAt
			n.state.Index(e)
		})
	}
	return n.state.View(e, now), nil
}

// storeError turns a SharedStore error into the registry's refusal
// (refusal.Store).
func (n *Node) storeError(err error) error { return refusal.Store(err) }

// secretOfWinner is the key another node stored under name first, when
// err says this node lost that race on a shared store (nodes of a fleet
// starting at once on an empty registry).
func (n *Node) secretOfWinner(ctx context.Context, name string, err error) (ed25519.PrivateKey, bool) {
	if n.shared == nil || !refusal.Is(err, CodeWordConcurrentChange) {
		return nil, false
	}
	rs, _ := n.shared.List(ctx, kindSecret, n.cfg.Now())
	return state.SeedOf(rs, name)
}
