package state

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/store"
)

// The kinds of the records a node stores, as far as the state reads them.
const (
	KindDescriptor = "descriptor"
	KindLocal      = "local"
	KindMark       = "watermark"
	KindCert       = "cert"
	KindCRL        = "crl"
	KindNonce      = "nonce"
	KindInvite     = "invite"
	// KindWhy records why a registration was deleted (deregistered,
	// revoked, expired by its owner), written in the deletion's own
	// transaction so that every node reports the same event; a deletion
	// without one is an expiry by the store's lease.
	KindWhy = "why"
	// KindKeyCerts, keyed by node key, is rewritten (empty) by every
	// issue of a certificate to the key and every revocation of one of
	// its certificates, on a shared store: a revocation by key made on a
	// node that has not seen a certificate issued elsewhere loses, rather
	// than leave that certificate valid and absent from the CRL; and a
	// registration of the key is conditional on it (RegisterConds).
	KindKeyCerts = "keycerts"
)

// FarFuture is the ExpiresAt of another node's local registration: it
// lives as long as that node's lease, which the store ends.
var FarFuture = descriptor.NodeLease

// Shared is the state a node on a SharedStore keeps besides the index:
// the revision of each record it holds and the registrations it deleted
// whose deletion the feed has not reported yet. Guarded as State is.
//
// In shared mode writes are conditional on Revs; a node's own change is
// published at once and comes back through the feed, which alone appends
// watch events; what the index holds is not reapplied.
type Shared struct {
	nodeID string
	Revs   map[string]uint64
	Tomb   map[string]*Registration // deleted here, until the feed reports it
	// Gone are the revisions of this node's own deletions, by Revs key,
	// until the feed reaches them: a put the feed delivers meanwhile is
	// older than the deletion, not new (Revs holds nothing of the key).
	Gone map[string]uint64
	// parsed are the registrations Prepare read for the next ApplyChange
	// calls, by index key; writers' state only.
	parsed map[string]*Registration
}

// Follow puts s in shared mode: the node is nodeID among the store's
// writers.
func (s *State) Follow(nodeID string) {
	s.Shared = &Shared{nodeID: nodeID, Revs: map[string]uint64{}, Tomb: map[string]*Registration{}, Gone: map[string]uint64{}}
}

// WhyRecord is the value of a KindWhy record.
type WhyRecord struct {
	Kind   string `json:"kind"`
	Reason string `json:"reason,omitempty"`
}

// RevKey names a record in Revs; node is the owner of another node's
// local registration ("" for this node's and for other kinds).
func RevKey(kind, key, node string) string {
	if node != "" {
		return kind + "\x00" + key + "\x00" + node
	}
	return kind + "\x00" + key
}

// WhyOf reads the KindWhy records among the changes of one revision.
func WhyOf(chs []store.Change) map[string]WhyRecord {
	why := map[string]WhyRecord{}
	for _, ch := range chs {
		var w WhyRecord
		if ch.Kind == KindWhy && !ch.Delete && json.Unmarshal(ch.Value, &w) == nil {
			why[ch.Key] = w
		}
	}
	return why
}

// WhyKey names the KindWhy record of a deletion of (kind, key).
func WhyKey(kind, key, node string) string { return kind + "/" + key + "/" + node }

// Owner is the owner of a change's local registration when it is another
// node, else "".
func (s *State) Owner(ch store.Change) string {
	if ch.Kind != KindLocal || ch.Node == "" || ch.Node == s.Shared.nodeID {
		return ""
	}
	return ch.Node
}

// indexKey is the index key of a registration change.
func (s *State) indexKey(ch store.Change) string {
	if o := s.Owner(ch); o != "" {
		return ch.Key + "@" + o
	}
	return ch.Key
}

// FromChange builds the registration a descriptor or local record holds.
// Another node's local registration is keyed "local:<name>@<node>" and
// lives as long as that node's lease.
func (s *State) FromChange(ch store.Change) (*Registration, error) {
	if ch.Kind == KindDescriptor {
		d, err := descriptor.Parse(ch.Value)
		if err != nil {
			return nil, err
		}
		e := FromDescriptor(d, ch.Value)
		e.Machine = ch.Machine
		return e, nil
	}
	var lr LocalRecord
	if err := json.Unmarshal(ch.Value, &lr); err != nil {
		return nil, err
	}
	e := FromLocal(lr, ch.Value)
	e.Machine = ch.Machine
	if o := s.Owner(ch); o != "" {
		e.Key += "@" + o
		e.ExpiresAt = FarFuture
		e.Trust.Reason = fmt.Sprintf("local registration on node %s (peer uid %d, identity.get matched there)", o, lr.UID)
	}
	return e, nil
}

// Prepare reads, ahead of ApplyChange, the registrations among chs that
// the state does not already hold as they are: parsing a descriptor is
// the costly part of applying a change, and the caller does it holding
// the writers' lock only, so that readers go on meanwhile (Find's latency
// while other nodes write). ApplyChange uses a prepared registration only
// if it was read from the same bytes; what it leaves is dropped by the
// next Prepare.
func (s *State) Prepare(chs []store.Change) {
	clear(s.Shared.parsed)
	for _, ch := range chs {
		if ch.Delete || (ch.Kind != KindDescriptor && ch.Kind != KindLocal) {
			continue
		}
		key := s.indexKey(ch)
		if cur := s.entries[key]; cur != nil && string(cur.Raw) == string(ch.Value) && cur.Machine == ch.Machine {
			continue // this node's own write, back from the feed
		}
		if e, err := s.FromChange(ch); err == nil {
			if s.Shared.parsed == nil {
				s.Shared.parsed = map[string]*Registration{}
			}
			s.Shared.parsed[key] = e
		}
	}
}

// ApplyChange applies one change of the shared store unless the state
// already holds it, and returns its event (for registrations); an error
// is a registration record it cannot read, which it drops (writer and
// readers' locks).
func (s *State) ApplyChange(ch store.Change, why map[string]WhyRecord, now time.Time) (Event, bool, error) {
	owner := s.Owner(ch)
	rk := RevKey(ch.Kind, ch.Key, owner)
	fresh := ch.Revision > s.Shared.Revs[rk] && ch.Revision > s.Shared.Gone[rk]
	// The feed comes in revision order: once it reaches an own deletion,
	// no older change of that key is to come — and the deletion of a key
	// that did not exist (a revocation's of a key not registered) brings
	// no change of its own to end its entry.
	for k, g := range s.Shared.Gone {
		if ch.Revision >= g {
			delete(s.Shared.Gone, k)
		}
	}
	if fresh {
		if ch.Delete {
			delete(s.Shared.Revs, rk)
		} else {
			s.Shared.Revs[rk] = ch.Revision
		}
	}
	switch ch.Kind {
	case KindDescriptor, KindLocal:
		return s.applyRegistration(ch, owner, fresh, why, now)
	}
	if fresh {
		s.applyTrust(ch)
	}
	return Event{}, false, nil
}

// applyRegistration applies a descriptor or local registration change
// when fresh and makes its event, from the index where it can (the live
// feed carries no previous values, and this node's own writes come back
// as they are already indexed).
func (s *State) applyRegistration(ch store.Change, owner string, fresh bool, why map[string]WhyRecord, now time.Time) (Event, bool, error) {
	key := s.indexKey(ch)
	cur := s.entries[key]
	if ch.Delete {
		if t, ok := s.Shared.Tomb[key]; ok && cur == nil {
			delete(s.Shared.Tomb, key)
			return RegEvent(ch, t, why, now), true, nil
		} else if cur == nil {
			ev, ok := s.HistoryEvent(ch, why, now)
			return ev, ok, nil
		}
		if fresh {
			s.Unindex(cur)
		}
		return RegEvent(ch, cur, why, now), true, nil
	}
	e := cur
	if e == nil || string(e.Raw) != string(ch.Value) || e.Machine != ch.Machine {
		var err error
		if p := s.Shared.parsed[key]; p != nil && string(p.Raw) == string(ch.Value) && p.Machine == ch.Machine {
			e = p
		} else if e, err = s.FromChange(ch); err != nil {
			return Event{}, false, err
		}
	}
	if fresh && ch.Kind == KindDescriptor && e.RegisteredAt.After(s.Marks[e.Key]) {
		s.Marks[e.Key] = e.RegisteredAt // a descriptor is its own watermark
	}
	if fresh && e != cur {
		if cur != nil && owner == "" && ch.Kind == KindLocal {
			// This node's own registration: its memory (renewed by
			// heartbeats) is authoritative for its TTL.
			e.ExpiresAt = cur.ExpiresAt
		}
		s.Index(e)
	}
	return RegEvent(ch, e, why, now), true, nil
}

// RegEvent is the event of a registration change whose entry is e.
func RegEvent(ch store.Change, e *Registration, why map[string]WhyRecord, now time.Time) Event {
	ev := EventOf("", e)
	switch {
	case ch.Delete:
		ev.Kind = EventExpired
		if w, ok := why[WhyKey(ch.Kind, ch.Key, ch.Node)]; ok {
			ev.Kind, ev.Reason = w.Kind, w.Reason
		}
	case ch.Prev != nil && (ch.Prev.ExpiresAt.IsZero() || now.Before(ch.Prev.ExpiresAt)):
		ev.Kind = EventReplaced
	case ch.Prev == nil && !ch.Created:
		ev.Kind = EventReplaced
	default:
		ev.Kind = EventRegistered
	}
	return ev
}

// applyTrust applies a change of another node to the watermarks, the
// certificates, the CRL or the spent nonces.
func (s *State) applyTrust(ch store.Change) {
	switch ch.Kind {
	case KindMark:
		if ch.Delete {
			delete(s.Marks, ch.Key)
			return
		}
		var at time.Time
		if json.Unmarshal(ch.Value, &at) == nil {
			s.Marks[ch.Key] = at
		}
	case KindCert:
		if ch.Delete {
			s.Trust.Forget(ch.Key)
		} else {
			s.Trust.ApplyCert(ch.Value)
		}
	case KindCRL:
		if ch.Key != "active" || ch.Delete {
			return
		}
		if c, err := descriptor.ParseCRL(ch.Value); err == nil {
			s.Trust.CRL = c
		}
	case KindNonce:
		if !ch.Delete {
			s.Nonces[ch.Key] = ch.ExpiresAt
		}
	}
}

// HistoryEvent is the event of a past change, without the index.
func (s *State) HistoryEvent(ch store.Change, why map[string]WhyRecord, now time.Time) (Event, bool) {
	src := ch
	if ch.Delete {
		if ch.Prev == nil {
			return Event{}, false
		}
		src.Record = *ch.Prev
	}
	e, err := s.FromChange(src)
	if err != nil {
		return Event{}, false
	}
	return RegEvent(ch, e, why, now), true
}

// HistoryEvents are the registration events of past changes, ordered by
// revision (a store's History), at now. Like FromChange and HistoryEvent
// it reads nothing the node's locks guard (only the node's id).
func (s *State) HistoryEvents(chs []store.Change, now time.Time) []Event {
	var out []Event
	for i := 0; i < len(chs); {
		j := i
		for j < len(chs) && chs[j].Revision == chs[i].Revision {
			j++
		}
		why := WhyOf(chs[i:j])
		for _, ch := range chs[i:j] {
			if ch.Kind != KindDescriptor && ch.Kind != KindLocal {
				continue
			}
			if ev, ok := s.HistoryEvent(ch, why, now); ok {
				ev.Revision, ev.At = ch.Revision, now
				out = append(out, ev)
			}
		}
		i = j
	}
	return out
}

// RegisterConds are the conditions of a registration of key's write:
// the records its checks read, as this node holds them. The descriptor;
// the watermark record, written or not (another node may have stored one,
// a newer descriptor deleted, that this node's feed has not delivered);
// and the key's KindKeyCerts record, which every issue of a certificate
// to the key and every revocation of one of its certificates (a pinned
// key's compromise included) rewrites: a registration checked before a
// revocation that can make the key untrusted and written after it loses,
// and its retry is checked against the revocation. It stands for the
// certificates the verdict rests on: the node may have forgotten an
// expired one (CertRetention) that another node revokes for
// key_compromise, and a key's many certificates would pass a store's
// bound on a transaction (etcd's 128 operations). Writers' state only.
func (s *State) RegisterConds(key string) []store.Cond {
	cond := func(kind, k string) store.Cond {
		return store.Cond{Kind: kind, Key: k, Rev: s.Shared.Revs[RevKey(kind, k, "")]}
	}
	return []store.Cond{cond(KindDescriptor, key), cond(KindMark, key), cond(KindKeyCerts, key)}
}

// CRLConds, in shared mode, require the active CRL to be as this node
// holds it (none: none stored); every revocation rewrites it. Writers'
// state only.
func (s *State) CRLConds() []store.Cond {
	if s.Shared == nil {
		return nil
	}
	return []store.Cond{{Kind: KindCRL, Key: "active", Rev: s.Shared.Revs[RevKey(KindCRL, "active", "")]}}
}

// WriteConds are extra and the conditions of a shared write of ops: each
// record as this node holds it (none: none may exist); an invite's
// deletion needs only that it exists (it is consumed once), a why record
// nothing. Writers' state only.
func (s *State) WriteConds(extra []store.Cond, ops []store.Op) []store.Cond {
	seen := map[string]bool{}
	for _, op := range ops {
		k := RevKey(op.Kind, op.Key, "")
		if op.Kind == KindWhy || seen[k] {
			continue
		}
		seen[k] = true
		extra = append(extra, store.Cond{Kind: op.Kind, Key: op.Key, Rev: s.Shared.Revs[k], Present: op.Kind == KindInvite && op.Delete})
	}
	return extra
}

// KeyCertsOps, in shared mode, rewrite nodeKey's KindKeyCerts record.
func (s *State) KeyCertsOps(nodeKey string) []store.Op {
	if s.Shared == nil {
		return nil
	}
	return []store.Op{{Record: store.Record{Kind: KindKeyCerts, Key: nodeKey}}}
}

// Written records that ops were written at rev (writers' state).
func (s *State) Written(ops []store.Op, rev uint64) {
	for _, op := range ops {
		if op.Delete {
			delete(s.Shared.Revs, RevKey(op.Kind, op.Key, ""))
			s.Shared.Gone[RevKey(op.Kind, op.Key, "")] = rev
		} else {
			s.Shared.Revs[RevKey(op.Kind, op.Key, "")] = rev
		}
	}
}

// WhyOps are the KindWhy records of the deletions among evs, made by node
// (the owner of a local registration), kept a minute from now.
func WhyOps(evs []Event, node string, now time.Time) []store.Op {
	var ops []store.Op
	for _, ev := range evs {
		switch ev.Kind {
		case EventDeregistered, EventRevoked, EventExpired:
			kind, owner := KindDescriptor, ""
			if ev.Source == SourceLocal {
				kind, owner = KindLocal, node
			}
			v, _ := json.Marshal(WhyRecord{Kind: ev.Kind, Reason: ev.Reason})
			ops = append(ops, store.Op{Record: store.Record{Kind: KindWhy, Key: WhyKey(kind, ev.Key, owner), Value: v, ExpiresAt: now.Add(time.Minute)}})
		}
	}
	return ops
}

// Resynced forgets, after a resync from a snapshot at rev, the deletions
// the snapshot covers (writers' and readers' locks).
func (s *State) Resynced(rev uint64) {
	clear(s.Shared.Tomb)
	for k, g := range s.Shared.Gone {
		if g <= rev {
			delete(s.Shared.Gone, k)
		}
	}
}
