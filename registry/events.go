package registry

import (
	"context"
	"time"

	"github.com/capmesh/capmesh/registry/internal/state"
)

// Event kinds delivered by Watch and ipc.watch.
const (
	EventRegistered   = state.EventRegistered
	EventReplaced     = state.EventReplaced
	EventExpired      = state.EventExpired
	EventRevoked      = state.EventRevoked
	EventDeregistered = state.EventDeregistered
)

// Event is one change of the registry. Revision is the registry version
// after the change: increasing, also across restarts. On a SharedStore it
// is the store's revision, the same on every node, and the changes of one
// store transaction share it (they are always delivered together).
type Event = state.Event

// Watch returns the events after revision since, restricted to entries
// having one of caps when caps is non-empty, and the current revision to
// resume from. When there are none yet and wait > 0, it blocks until one
// arrives, wait passes, ctx ends or the node is closed. A since older than the retained
// history is refused with CodeWordCompacted: the caller re-reads the full
// state (List) and resumes from the revision in the error details — except
// since 0 (a watcher from the start), which gets the current state as
// "registered" events (Reason "snapshot") at the current revision.
func (n *Node) Watch(ctx context.Context, since uint64, caps []string, wait time.Duration) (uint64, []Event, error) {
	var deadline <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		deadline = t.C
	}
	// On a shared store a cursor ahead of the node is another node's (the
	// revisions are the store's): it waits up to 5 s for the node's feed.
	var ahead <-chan time.Time
	for {
		n.mu.RLock()
		rev := n.state.Version
		changed := n.changed
		first := n.state.FirstEvent()
		if since > rev {
			n.mu.RUnlock()
			if n.shared != nil && ahead == nil {
				ahead = time.After(5 * time.Second)
			}
			if ahead != nil {
				select {
				case <-changed:
					continue
				case <-ahead:
				case <-n.done:
				case <-ctx.Done():
				}
			}
			return rev, nil, refuse(CodeWordInvalidParams, "since_revision %d is ahead of the registry (revision %d)", since, rev)
		}
		if since+1 < first && since < rev {
			n.mu.RUnlock()
			if n.shared != nil && since != 0 {
				return n.watchShared(ctx, since, first-1, rev, caps)
			}
			if since == 0 {
				// A watcher from the start, on a node that no longer holds
				// the start (a restart: events are not persisted): the net
				// effect of the history is the current state.
				n.mu.RLock()
				defer n.mu.RUnlock()
				return rev, n.state.Snapshot(rev, caps, n.cfg.Now()), nil
			}
			e := refuse(CodeWordCompacted, "events before revision %d are no longer retained; re-list and resume from revision %d", first, rev)
			e.Details = map[string]any{"revision": rev}
			return rev, nil, e
		}
		out := n.state.Events(since, rev, caps)
		n.mu.RUnlock()
		if len(out) > 0 || deadline == nil {
			return rev, out, nil
		}
		since = rev
		select {
		case <-changed:
		case <-deadline:
			return rev, nil, nil
		case <-n.done:
			return rev, nil, nil
		case <-ctx.Done():
			return rev, nil, ctx.Err()
		}
	}
}
