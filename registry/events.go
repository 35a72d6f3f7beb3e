package registry

import (
	"context"
	"time"
)

// Event kinds delivered by Watch and ipc.watch.
const (
	EventRegistered   = "registered"
	EventReplaced     = "replaced"
	EventExpired      = "expired"
	EventRevoked      = "revoked"
	EventDeregistered = "deregistered"
)

// Event is one change of the registry. Revision is the registry version
// after the change: increasing, also across restarts. On a SharedStore it
// is the store's revision, the same on every node, and the changes of one
// store transaction share it (they are always delivered together).
type Event struct {
	Revision     uint64    `json:"revision"`
	Kind         string    `json:"kind"`
	Key          string    `json:"key"`
	Name         string    `json:"primal"`
	Capabilities []string  `json:"capabilities"`
	Endpoint     string    `json:"endpoint"`
	Source       string    `json:"source"`
	Reason       string    `json:"reason,omitempty"`
	At           time.Time `json:"at"`
}

// snapshot is the current state as "registered" events at revision rev,
// with Reason "snapshot".
func (n *Node) snapshot(rev uint64, caps []string) []Event {
	now := n.cfg.Now().UTC()
	out := []Event{}
	for _, e := range n.List(true) {
		if !matchCaps(e.Capabilities, caps) {
			continue
		}
		out = append(out, Event{Revision: rev, Kind: EventRegistered, Key: e.Key, Name: e.Name, Capabilities: append([]string(nil), e.Capabilities...),
			Endpoint: e.Endpoint, Source: e.Source, Reason: "snapshot", At: now})
	}
	return out
}

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
	for {
		n.mu.RLock()
		rev := n.version
		changed := n.changed
		var first uint64
		if len(n.events) > 0 {
			first = n.events[0].Revision
		} else {
			first = rev + 1
		}
		if since > rev {
			n.mu.RUnlock()
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
				return rev, n.snapshot(rev, caps), nil
			}
			e := refuse(CodeWordCompacted, "events before revision %d are no longer retained; re-list and resume from revision %d", first, rev)
			e.Details = map[string]any{"revision": rev}
			return rev, nil, e
		}
		var out []Event
		for _, ev := range n.events {
			if ev.Revision <= since || !matchCaps(ev.Capabilities, caps) {
				continue
			}
			ev.Capabilities = append([]string(nil), ev.Capabilities...)
			out = append(out, ev)
		}
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

func matchCaps(have, want []string) bool {
	if len(want) == 0 {
		return true
	}
	for _, w := range want {
		for _, h := range have {
			if h == w {
				return true
			}
		}
	}
	return false
}
