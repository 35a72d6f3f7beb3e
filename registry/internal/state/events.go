package state

import "time"

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

// EventOf is the event of kind about e.
func EventOf(kind string, e *Registration) Event {
	return Event{Kind: kind, Key: e.Key, Name: e.Name, Capabilities: e.Capabilities, Endpoint: e.Endpoint, Source: e.Source}
}

// Append records evs, each one version after the last, at now (writer and
// readers' locks).
func (s *State) Append(evs []Event, now time.Time) {
	for _, ev := range evs {
		s.Version++
		ev.Revision = s.Version
		ev.At = now
		s.events = append(s.events, ev)
	}
	s.trim()
}

// Record records evs at revision rev, the revision of a shared store's
// transaction, and moves the version up to rev (writer and readers' locks).
func (s *State) Record(evs []Event, rev uint64, now time.Time) {
	for _, ev := range evs {
		ev.Revision, ev.At = rev, now
		s.events = append(s.events, ev)
	}
	s.trim()
	if rev > s.Version {
		s.Version = rev
	}
}

// trim keeps at least history events. Trimming only once the ring holds
// twice that keeps a change O(1) amortized; trimming on every change
// copied the whole history each time (O(history) per registration). The
// events of one revision (one transaction's) go together.
func (s *State) trim() {
	if len(s.events) < 2*s.history {
		return
	}
	over := len(s.events) - s.history
	for over < len(s.events) && s.events[over].Revision == s.events[over-1].Revision {
		over++
	}
	s.events = append(make([]Event, 0, 2*s.history), s.events[over:]...)
}

// ResetEvents forgets the event history (a resync from a new snapshot).
func (s *State) ResetEvents() { s.events = nil }

// FirstEvent is the revision of the oldest event held, or Version+1 when
// none is.
func (s *State) FirstEvent() uint64 {
	if len(s.events) > 0 {
		return s.events[0].Revision
	}
	return s.Version + 1
}

// Events returns copies of the events held with a revision in
// (after, upto] about an entry having one of caps (any when caps is empty).
func (s *State) Events(after, upto uint64, caps []string) []Event {
	var out []Event
	for _, ev := range s.events {
		if ev.Revision <= after || ev.Revision > upto || !MatchCaps(ev.Capabilities, caps) {
			continue
		}
		ev.Capabilities = append([]string(nil), ev.Capabilities...)
		out = append(out, ev)
	}
	return out
}

// Snapshot is the current state as "registered" events at revision rev,
// with Reason "snapshot", restricted to entries having one of caps.
func (s *State) Snapshot(rev uint64, caps []string, now time.Time) []Event {
	out := []Event{}
	for _, e := range s.List(now, true) {
		if !MatchCaps(e.Capabilities, caps) {
			continue
		}
		out = append(out, Event{Revision: rev, Kind: EventRegistered, Key: e.Key, Name: e.Name, Capabilities: append([]string(nil), e.Capabilities...),
			Endpoint: e.Endpoint, Source: e.Source, Reason: "snapshot", At: now.UTC()})
	}
	return out
}

// MatchCaps reports whether have holds one of want (true for no want).
func MatchCaps(have, want []string) bool {
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

// FilterCaps keeps, in place, the events of evs having one of caps (all
// when caps is empty).
func FilterCaps(evs []Event, caps []string) []Event {
	out := evs[:0]
	for _, ev := range evs {
		if MatchCaps(ev.Capabilities, caps) {
			out = append(out, ev)
		}
	}
	return out
}
