package state

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/capmesh/capmesh/registry/store"
)

// The bookkeeping of a node's own writes to a SharedStore, and of loading
// and resyncing from its snapshots: which registrations a write deletes
// (until the feed reports it), what a registration writes and under which
// conditions, which records a snapshot no longer holds. Package registry
// does the I/O; all of it is writers' state unless a method says
// otherwise.

// Deleting records the registrations ops delete in Shared.Tomb (their
// event comes back through the feed) and returns ops with, for each
// deleted descriptor, the watermark it leaves behind until its own
// expiry plus skew (the descriptor was the watermark).
func (s *State) Deleting(ops []store.Op, skew time.Duration) []store.Op {
	for _, op := range ops {
		e, ok := s.Lookup(op.Key)
		if ok && op.Delete {
			s.Shared.Tomb[op.Key] = e
		}
		if ok && op.Kind == KindDescriptor && op.Delete && !s.Marks[op.Key].IsZero() {
			v, _ := json.Marshal(s.Marks[op.Key])
			ops = append(ops, store.Op{Record: store.Record{Kind: KindMark, Key: op.Key, Value: v, ExpiresAt: e.ExpiresAt.Add(skew)}})
		}
	}
	return ops
}

// Undelete forgets the Tomb entries of ops after their write failed: not
// deleted after all.
func (s *State) Undelete(ops []store.Op) {
	for _, op := range ops {
		delete(s.Shared.Tomb, op.Key)
	}
}

// Loading records the revision of every record of a snapshot and splits
// it: the records a node loads as from its own store, and other nodes'
// local registrations, which Loaded indexes afterwards.
func (s *State) Loading(chs []store.Change) (own []store.Record, others []store.Change) {
	for _, ch := range chs {
		s.Shared.Revs[RevKey(ch.Kind, ch.Key, s.Owner(ch))] = ch.Revision
		if ch.Kind == KindLocal && s.Owner(ch) != "" {
			others = append(others, ch)
			continue
		}
		own = append(own, ch.Record)
	}
	return own, others
}

// Loaded completes a load from a snapshot at rev: it indexes others
// (Loading's; an unreadable one is skipped), marks the descriptors' watermarks
// and sets the version to rev.
func (s *State) Loaded(others []store.Change, rev uint64) {
	for _, ch := range others {
		if e, err := s.FromChange(ch); err == nil {
			s.Index(e)
		}
	}
	s.MarkDescriptors()
	s.Version = rev
}

// Missing are the deletions, at rev, of the records the node holds (by
// Revs) that a snapshot's changes chs no longer have, for a resync.
func (s *State) Missing(chs []store.Change, rev uint64) []store.Change {
	live := map[string]bool{}
	for _, ch := range chs {
		live[RevKey(ch.Kind, ch.Key, s.Owner(ch))] = true
	}
	var out []store.Change
	for k := range s.Shared.Revs {
		if live[k] {
			continue
		}
		ch := store.Change{Revision: rev}
		ch.Kind, ch.Key, _ = strings.Cut(k, "\x00")
		if kk, node, ok := strings.Cut(ch.Key, "\x00"); ok && ch.Kind == KindLocal {
			ch.Key, ch.Node = kk, node // a nonce's key holds \x00 too
		}
		ch.Delete = true
		out = append(out, ch)
	}
	return out
}

// SameCond is the condition that the descriptor record of key is still
// the one this node holds: a re-registration of the same descriptor is
// answered as stored only if it is.
func (s *State) SameCond(key string) store.Cond {
	return store.Cond{Kind: KindDescriptor, Key: key, Rev: s.Shared.Revs[RevKey(KindDescriptor, key, "")]}
}

// RegisterOps trims Admit's writes ops of e for a shared store: the
// stored descriptor is its own watermark (its registered_at), so a
// separate watermark record is written only when an older descriptor
// could outlive e (it expires later), and then as long as that one lives
// plus skew.
func (s *State) RegisterOps(e *Registration, ops []store.Op, skew time.Duration) []store.Op {
	if cur, had := s.Lookup(e.Key); had && cur.ExpiresAt.After(e.ExpiresAt) {
		ops[1].ExpiresAt = cur.ExpiresAt.Add(skew) // as long as the older one lives
		return ops
	}
	return ops[:1]
}

// Registered records that a registration of key (with its watermark
// record when mark) was written at rev, and reports whether the caller
// must publish it: not once the feed reached rev, which applied this
// write and maybe a later change of the key (a deletion leaves no
// revision in Revs).
func (s *State) Registered(key string, rev uint64, mark bool) bool {
	dk := RevKey(KindDescriptor, key, "")
	if s.Version >= rev || s.Shared.Revs[dk] >= rev {
		return false
	}
	s.Shared.Revs[dk] = rev
	if mark {
		s.Shared.Revs[RevKey(KindMark, key, "")] = rev
	}
	return true
}
