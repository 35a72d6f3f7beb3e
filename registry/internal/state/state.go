// Package state is the registry node's in-memory state: the
// registrations and their capability index, the anti-rollback
// watermarks, the network authority's certificates and CRL, and the
// ring of watch events; and the checks that read only that state
// (checks.go), which answer with the registry's refusals
// (registry/internal/refusal). It does no I/O, starts no goroutine and
// takes no lock: package registry owns a State and guards it — reads
// under its readers' lock, changes under its writer lock and, once
// durable, the readers' lock too (see registry/doc.go). A method that
// only reads needs either lock (a writer reads under the writer lock
// alone: no one else changes the state); a method that changes says
// "(writer and readers' locks)" — or "writer lock" for what readers
// never see.
package state

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/store"
)

// Source tells how an entry was registered.
const (
	SourceLocal      = "local"      // unsigned ipc.register from a same-user Unix peer
	SourceDescriptor = "descriptor" // signed RFC-005 descriptor
)

// Verdict is the trust policy's answer about a provider, carried by every
// result so that a consumer can re-evaluate when trust changes.
type Verdict struct {
	Trusted bool   `json:"trusted"`
	Reason  string `json:"reason"`
}

// Entry is one live registration as the registry reports it.
type Entry struct {
	// Key identifies the entry: the node public key for a descriptor,
	// "local:<name>" for a local registration.
	Key          string    `json:"key"`
	Name         string    `json:"name"`
	Capabilities []string  `json:"capabilities"`
	Endpoint     string    `json:"endpoint"`
	Source       string    `json:"source"`
	Version      string    `json:"version,omitempty"`
	RegisteredAt time.Time `json:"registered_at"`
	ExpiresAt    time.Time `json:"expires_at"`
	Trust        Verdict   `json:"trust"`
	// Descriptor is the signed descriptor of a SourceDescriptor entry, in
	// its normalized wire form (genesis canonical JSON, byte for byte what
	// GET /agents serves); descriptor.Parse reads it. It shares the
	// registry's copy: do not modify it.
	Descriptor json.RawMessage `json:"descriptor,omitempty"`
	// Machine identifies the machine that admitted a registration naming
	// an endpoint only its own machine reaches (endpoint.LocalOnly), as
	// the store recorded it ("" when none was): see LocalElsewhere.
	Machine string `json:"-"`
}

// Registration is the indexed form of an entry.
type Registration struct {
	Entry
	Raw []byte // stored record value (for a descriptor: its wire form)
	// vUntil bounds the cached verdict of a descriptor entry (in
	// Entry.Trust): from then on it may change by itself (the certificate
	// it rests on expires). Trust changes of the entry's key refresh it at
	// once (Authority.onChange); the sweeper refreshes lapsed ones. Written
	// only under the write lock, read under the read lock; a reader that
	// finds it lapsed recomputes without storing. Kept inline so that Find
	// touches one object per provider.
	vUntil time.Time
}

// LocalRecord is the stored form of an unsigned local registration.
type LocalRecord struct {
	Name         string    `json:"name"`
	Capabilities []string  `json:"capabilities"`
	Endpoint     string    `json:"endpoint"`
	Version      string    `json:"version,omitempty"`
	UID          uint32    `json:"uid"`
	PID          int32     `json:"pid,omitempty"`        // the registrant's process
	TokenHash    string    `json:"token_hash,omitempty"` // SHA-256 of its registration token
	RegisteredAt time.Time `json:"registered_at"`
	ExpiresAt    time.Time `json:"expires_at"`
}

// FromDescriptor is the registration of a verified descriptor whose
// stored wire form is raw.
func FromDescriptor(d *descriptor.Descriptor, raw []byte) *Registration {
	e := &Registration{Raw: raw}
	e.Key = d.NodePublicKey
	e.Name = d.AgentID
	e.Capabilities = d.Capabilities
	e.Endpoint = d.Endpoint.URI()
	e.Source = SourceDescriptor
	e.RegisteredAt = d.RegisteredAt.Instant()
	e.ExpiresAt = d.ExpiresAt.Instant()
	e.Descriptor = raw
	return e
}

// LocalKey is the key of a local registration. Primal names compare
// ASCII case-insensitively (as Songbird and the identity probe compare), so
// "BearDog" and "beardog" are one registration, not two.
func LocalKey(name string) string { return "local:" + strings.ToLower(name) }

// FromLocal is the registration of a local record whose stored form is raw.
func FromLocal(lr LocalRecord, raw []byte) *Registration {
	e := &Registration{Raw: raw}
	e.Key = LocalKey(lr.Name)
	e.Name = lr.Name
	e.Capabilities = lr.Capabilities
	e.Endpoint = lr.Endpoint
	e.Source = SourceLocal
	e.Version = lr.Version
	e.RegisteredAt = lr.RegisteredAt
	e.ExpiresAt = lr.ExpiresAt
	e.Trust = Verdict{Trusted: true, Reason: fmt.Sprintf("local peer uid %d, identity.get matched", lr.UID)}
	return e
}

// newer orders entries as discovery returns them: newest registration
// first, ties by key.
func newer(a, b *Registration) bool {
	if !a.RegisteredAt.Equal(b.RegisteredAt) {
		return a.RegisteredAt.After(b.RegisteredAt)
	}
	return a.Key < b.Key
}

func cmpDiscovery(a, b *Registration) int {
	switch {
	case a == b:
		return 0
	case newer(a, b):
		return -1
	case newer(b, a):
		return 1
	}
	return 0
}

// State is a node's in-memory state. Its exported fields, like its
// methods, are read under either lock and changed under the writer lock
// (and, for what readers see, the readers' lock as well).
type State struct {
	now     func() time.Time
	skew    time.Duration
	history int // watch events kept at least

	entries map[string]*Registration
	byCap   map[string][]*Registration // capability → providers in discovery order (newer)
	events  []Event                    // ring, oldest first

	// Marks is the anti-rollback watermark: node key → newest
	// registered_at accepted.
	Marks map[string]time.Time
	// Trust is the network authority's state; nil until SetTrust.
	Trust *Authority
	// Version is the registry version (revision).
	Version uint64
	// Shared is the shared-store mode's state; nil unless Follow.
	Shared *Shared
	// Nonces are the spent one-time values (scope\x00nonce → until);
	// writers' state only (the writer lock alone guards it).
	Nonces map[string]time.Time
}

// New returns an empty state on the clock now, with skew as the tolerance
// on a registration's start and history as the watch events kept at least.
func New(now func() time.Time, skew time.Duration, history int) *State {
	return &State{now: now, skew: skew, history: history,
		entries: map[string]*Registration{}, byCap: map[string][]*Registration{},
		Marks: map[string]time.Time{}, Nonces: map[string]time.Time{}}
}

// SetTrust installs the authority whose verdicts the index caches; its
// trust changes refresh them from then on.
func (s *State) SetTrust(t *Authority) {
	s.Trust = t
	t.onChange = s.trustChanged
	for _, e := range s.entries {
		s.RefreshVerdict(e, s.now())
	}
}

// Lookup returns the registration under key, live or not.
func (s *State) Lookup(key string) (*Registration, bool) {
	e, ok := s.entries[key]
	return e, ok
}

// Len is the number of registrations, live or not.
func (s *State) Len() int { return len(s.entries) }

// Index adds or replaces e (writer and readers' locks, or loading). Each
// capability's providers stay sorted in discovery order, so Find never
// sorts.
func (s *State) Index(e *Registration) (replaced *Registration) {
	if old, ok := s.entries[e.Key]; ok {
		s.Unindex(old)
		replaced = old
	}
	for i, c := range e.Capabilities {
		if slices.Contains(e.Capabilities[:i], c) {
			continue // a duplicate tag (kept in the signed list) is indexed once
		}
		list := s.byCap[c]
		at, _ := slices.BinarySearchFunc(list, e, cmpDiscovery)
		s.byCap[c] = slices.Insert(list, at, e)
	}
	s.entries[e.Key] = e
	s.RefreshVerdict(e, s.now())
	return replaced
}

// Unindex removes e (writer and readers' locks).
func (s *State) Unindex(e *Registration) {
	delete(s.entries, e.Key)
	for i, c := range e.Capabilities {
		if slices.Contains(e.Capabilities[:i], c) {
			continue
		}
		list := s.byCap[c]
		at, found := slices.BinarySearchFunc(list, e, cmpDiscovery)
		if !found || list[at] != e {
			continue
		}
		list = slices.Delete(list, at, at+1)
		if len(list) == 0 {
			delete(s.byCap, c)
		} else {
			s.byCap[c] = list
		}
	}
}

// Live reports whether e is inside its TTL window at now.
func (s *State) Live(e *Registration, now time.Time) bool {
	if !now.Before(e.ExpiresAt) {
		return false
	}
	return !now.Before(e.RegisteredAt.Add(-s.skew))
}

// Verdict evaluates trust for e at now (either lock). A descriptor's
// verdict is cached in the registration (see Registration).
func (s *State) Verdict(e *Registration, now time.Time) Verdict {
	if e.Source == SourceLocal {
		return e.Trust
	}
	if now.Before(e.vUntil) {
		return e.Trust
	}
	v, _ := s.Trust.VerdictUntil(e.Key, now)
	return v
}

// RefreshVerdict recomputes and stores e's cached verdict (writer and
// readers' locks).
func (s *State) RefreshVerdict(e *Registration, now time.Time) {
	if e.Source == SourceLocal || s.Trust == nil {
		return
	}
	e.Trust, e.vUntil = s.Trust.VerdictUntil(e.Key, now)
}

// trustChanged is Authority.onChange: the trust of a node key changed, so
// its entry's cached verdict is recomputed.
func (s *State) trustChanged(key string) {
	if e, ok := s.entries[key]; ok {
		s.RefreshVerdict(e, s.now())
	}
}

// Expired returns the registrations past their TTL at now, and the live
// descriptor registrations whose cached verdict has lapsed.
func (s *State) Expired(now time.Time) (dead, lapsed []*Registration) {
	for _, e := range s.entries {
		if !now.Before(e.ExpiresAt) {
			dead = append(dead, e)
		} else if e.Source == SourceDescriptor && !now.Before(e.vUntil) {
			lapsed = append(lapsed, e)
		}
	}
	return dead, lapsed
}

// View copies e for a caller, with its verdict.
func (s *State) View(e *Registration, now time.Time) Entry {
	v := e.Entry
	v.Capabilities = append([]string(nil), e.Capabilities...)
	v.Trust = s.Verdict(e, now)
	return v
}

func viewWith(e *Registration, v Verdict) Entry {
	x := e.Entry
	x.Trust = v
	return x
}

// Providers is how many registrations, live or not, offer capability.
func (s *State) Providers(capability string) int { return len(s.byCap[capability]) }

// FindFunc calls fn with each live provider of capability, trusted only
// unless includeUntrusted, in discovery order, until fn returns false or
// limit (when positive) are found.
func (s *State) FindFunc(capability string, now time.Time, includeUntrusted bool, limit int, fn func(Entry) bool) {
	count := 0
	for _, e := range s.byCap[capability] {
		if !s.Live(e, now) {
			continue
		}
		v := s.Verdict(e, now)
		if !v.Trusted && !includeUntrusted {
			continue
		}
		if !fn(viewWith(e, v)) {
			return
		}
		if count++; limit > 0 && count == limit {
			return
		}
	}
}

// DescriptorWires returns the stored wire form of the live, trusted
// descriptor entries having capability (all when capability is empty), in
// discovery order.
func (s *State) DescriptorWires(capability string, now time.Time) [][]byte {
	var list []*Registration
	if capability != "" {
		list = s.byCap[capability]
	} else {
		list = make([]*Registration, 0, len(s.entries))
		for _, e := range s.entries {
			list = append(list, e)
		}
		slices.SortFunc(list, cmpDiscovery)
	}
	out := make([][]byte, 0, len(list))
	for _, e := range list {
		if e.Source == SourceDescriptor && s.Live(e, now) && s.Verdict(e, now).Trusted {
			out = append(out, e.Raw)
		}
	}
	return out
}

// List returns every live entry (trusted only unless includeUntrusted),
// newest registration first, ties by key.
func (s *State) List(now time.Time, includeUntrusted bool) []Entry {
	out := make([]Entry, 0, len(s.entries))
	for _, e := range s.entries {
		if !s.Live(e, now) {
			continue
		}
		v := s.Verdict(e, now)
		if !v.Trusted && !includeUntrusted {
			continue
		}
		out = append(out, viewWith(e, v))
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].RegisteredAt.Equal(out[j].RegisteredAt) {
			return out[i].RegisteredAt.After(out[j].RegisteredAt)
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// Get returns the live entry with key.
func (s *State) Get(key string, now time.Time) (Entry, bool) {
	e, ok := s.entries[key]
	if !ok || !s.Live(e, now) {
		return Entry{}, false
	}
	return s.View(e, now), true
}

// ResolveName finds a live, trusted entry by name (local first, then the
// newest descriptor whose agent_id matches).
func (s *State) ResolveName(name string, now time.Time) (Entry, bool) {
	if e, ok := s.entries[LocalKey(name)]; ok && s.Live(e, now) {
		return s.View(e, now), true
	}
	var best *Registration
	for _, e := range s.entries {
		if e.Source == SourceDescriptor && e.Name == name && s.Live(e, now) && s.Verdict(e, now).Trusted {
			if best == nil || e.RegisteredAt.After(best.RegisteredAt) {
				best = e
			}
		}
	}
	if best == nil {
		return Entry{}, false
	}
	return s.View(best, now), true
}

// Capabilities is the number of distinct capability tags offered.
func (s *State) Capabilities() int { return len(s.byCap) }

// MarkDescriptors raises each node key's watermark to the registered_at
// of its indexed descriptor: a stored descriptor is its own watermark.
func (s *State) MarkDescriptors() {
	for _, e := range s.entries {
		if e.Source == SourceDescriptor && e.RegisteredAt.After(s.Marks[e.Key]) {
			s.Marks[e.Key] = e.RegisteredAt
		}
	}
}

// Restore indexes stored records of one kind — watermarks, descriptors or
// local registrations — when a node starts, and returns an error for each
// registration it cannot read (it drops those; an unreadable watermark is
// ignored).
func (s *State) Restore(kind string, rs []store.Record) []error {
	var errs []error
	for _, r := range rs {
		switch kind {
		case KindMark:
			var t time.Time
			if json.Unmarshal(r.Value, &t) == nil {
				s.Marks[r.Key] = t
			}
		case KindDescriptor:
			d, err := descriptor.Parse(r.Value)
			if err != nil {
				errs = append(errs, fmt.Errorf("stored descriptor %s: %w", r.Key, err))
				continue
			}
			e := FromDescriptor(d, r.Value)
			e.Machine = r.Machine
			s.Index(e)
		case KindLocal:
			var lr LocalRecord
			if err := json.Unmarshal(r.Value, &lr); err != nil {
				errs = append(errs, fmt.Errorf("local registration %s: %w", r.Key, err))
				continue
			}
			e := FromLocal(lr, r.Value)
			e.Machine = r.Machine
			s.Index(e)
		}
	}
	return errs
}

// ForgetNonces forgets the spent nonces that ended by now (writer lock).
func (s *State) ForgetNonces(now time.Time) {
	for k, exp := range s.Nonces {
		if !now.Before(exp) {
			delete(s.Nonces, k)
		}
	}
}
