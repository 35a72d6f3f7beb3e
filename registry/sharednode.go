package registry

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/capmesh/capmesh/registry/descriptor"
)

// Shared mode (SharedStore): writes are conditional on n.revs; a node's
// own change is published at once and comes back through the feed, which
// alone appends ipc.watch events; what the index holds is not reapplied.

// whyRecord is the value of a kindWhy record.
type whyRecord struct {
	Kind   string `json:"kind"`
	Reason string `json:"reason,omitempty"`
}

// revKey names a record in n.revs; node is the owner of another node's
// local registration ("" for this node's and for other kinds).
func revKey(kind, key, node string) string {
	if node != "" {
		return kind + "\x00" + key + "\x00" + node
	}
	return kind + "\x00" + key
}

// whyOf reads the kindWhy records among the changes of one revision.
func whyOf(chs []Change) map[string]whyRecord {
	why := map[string]whyRecord{}
	for _, ch := range chs {
		var w whyRecord
		if ch.Kind == kindWhy && !ch.Delete && json.Unmarshal(ch.Value, &w) == nil {
			why[ch.Key] = w
		}
	}
	return why
}

// whyKey names the kindWhy record of a deletion of (kind, key).
func whyKey(kind, key, node string) string { return kind + "/" + key + "/" + node }

// apply writes ops to the store: in shared mode conditionally on the
// revisions this node holds of the records they touch, recording the new
// ones. The caller holds wmu. A lost race is CodeWordConcurrentChange, an
// unreachable store CodeWordStoreUnavailable (both retryable).
func (n *Node) apply(ctx context.Context, ops ...Op) error {
	if n.shared == nil {
		return n.st.Apply(ctx, ops...)
	}
	conds := make([]Cond, 0, len(ops))
	seen := map[string]bool{}
	for i, op := range ops {
		if op.Kind == kindLocal && !op.Delete {
			// Kept alive by the node's lease; the TTL is the node's memory.
			ops[i].ExpiresAt = time.Time{}
		}
		k := revKey(op.Kind, op.Key, "")
		if op.Kind == kindWhy || seen[k] {
			continue
		}
		seen[k] = true
		// An invite is consumed once: its deletion needs only that it exists.
		conds = append(conds, Cond{Kind: op.Kind, Key: op.Key, Rev: n.revs[k], Present: op.Kind == kindInvite && op.Delete})
	}
	rev, err := n.shared.ApplyIf(ctx, conds, ops...)
	if err != nil {
		return n.storeError(err)
	}
	for _, op := range ops {
		if op.Delete {
			delete(n.revs, revKey(op.Kind, op.Key, ""))
		} else {
			n.revs[revKey(op.Kind, op.Key, "")] = rev
		}
	}
	return nil
}

// commitShared is commit on a SharedStore: the write, with a record of
// why for each deletion; the events come back through the feed.
func (n *Node) commitShared(ctx context.Context, ops []Op, evs []Event) error {
	for _, op := range ops {
		e, ok := n.entries[op.Key]
		if ok && op.Delete {
			n.tomb[op.Key] = e // its event comes back through the feed
		}
		// A deleted descriptor leaves its watermark behind, until its own
		// expiry: the descriptor was the watermark.
		if ok && op.Kind == kindDescriptor && op.Delete && !n.marks[op.Key].IsZero() {
			v, _ := json.Marshal(n.marks[op.Key])
			ops = append(ops, Op{Record: Record{Kind: kindMark, Key: op.Key, Value: v, ExpiresAt: e.ExpiresAt.Add(n.cfg.Skew)}})
		}
	}
	for _, ev := range evs {
		switch ev.Kind {
		case EventDeregistered, EventRevoked, EventExpired:
			kind, node := kindDescriptor, ""
			if ev.Source == SourceLocal {
				kind, node = kindLocal, n.shared.NodeID()
			}
			v, _ := json.Marshal(whyRecord{Kind: ev.Kind, Reason: ev.Reason})
			ops = append(ops, Op{Record: Record{Kind: kindWhy, Key: whyKey(kind, ev.Key, node), Value: v, ExpiresAt: n.cfg.Now().Add(time.Minute)}})
		}
	}
	err := n.apply(ctx, ops...)
	for _, op := range ops {
		if err != nil { // not deleted after all
			delete(n.tomb, op.Key)
		}
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
	var others []Change
	for _, ch := range chs {
		n.revs[revKey(ch.Kind, ch.Key, n.owner(ch))] = ch.Revision
		if ch.Kind == kindLocal && n.owner(ch) != "" {
			others = append(others, ch)
			continue
		}
		_ = view.MemStore.Apply(ctx, Op{Record: ch.Record})
	}
	st := n.st
	n.st = view
	err = n.load(ctx)
	n.st = st
	if err != nil {
		return err
	}
	for _, ch := range others {
		if e, err := n.sharedEntry(ch); err == nil {
			n.index(e)
		}
	}
	for _, e := range n.entries {
		if e.Source == SourceDescriptor && e.RegisteredAt.After(n.marks[e.Key]) {
			n.marks[e.Key] = e.RegisteredAt
		}
	}
	n.version = rev
	return nil
}

// owner is the owner of a change's local registration when it is another
// node, else "".
func (n *Node) owner(ch Change) string {
	if ch.Kind != kindLocal || ch.Node == "" || ch.Node == n.shared.NodeID() {
		return ""
	}
	return ch.Node
}

// sharedEntry builds the index entry a descriptor or local record holds.
// Another node's local registration is keyed "local:<name>@<node>" and
// lives as long as that node's lease.
func (n *Node) sharedEntry(ch Change) (*entry, error) {
	if ch.Kind == kindDescriptor {
		d, err := descriptor.Parse(ch.Value)
		if err != nil {
			return nil, err
		}
		return descriptorEntry(d, ch.Value), nil
	}
	var lr localRecord
	if err := json.Unmarshal(ch.Value, &lr); err != nil {
		return nil, err
	}
	e := localEntry(lr, ch.Value)
	if o := n.owner(ch); o != "" {
		e.Key += "@" + o
		e.ExpiresAt = farFuture
		e.Trust.Reason = fmt.Sprintf("local registration on node %s (peer uid %d, identity.get matched there)", o, lr.UID)
	}
	return e, nil
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
	now, why := n.cfg.Now(), whyOf(chs)
	n.wmu.Lock()
	defer n.wmu.Unlock()
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

// applyChange applies one change unless the index already holds it, and
// returns its event (for registrations). The caller holds wmu and mu.
func (n *Node) applyChange(ch Change, why map[string]whyRecord, now time.Time) (Event, bool) {
	owner := n.owner(ch)
	rk := revKey(ch.Kind, ch.Key, owner)
	fresh := ch.Revision > n.revs[rk]
	if fresh {
		if ch.Delete {
			delete(n.revs, rk)
		} else {
			n.revs[rk] = ch.Revision
		}
	}
	switch ch.Kind {
	case kindDescriptor, kindLocal:
		return n.applyRegistration(ch, owner, fresh, why, now)
	}
	if fresh {
		n.applyTrust(ch)
	}
	return Event{}, false
}

// applyRegistration applies a descriptor or local registration change
// when fresh and makes its event, from the index where it can (the live
// feed carries no previous values, and this node's own writes come back
// as they are already indexed).
func (n *Node) applyRegistration(ch Change, owner string, fresh bool, why map[string]whyRecord, now time.Time) (Event, bool) {
	cur := n.entries[n.indexKey(ch)]
	if ch.Delete {
		if t, ok := n.tomb[n.indexKey(ch)]; ok && cur == nil {
			delete(n.tomb, n.indexKey(ch))
			return regEvent(ch, t, why, now), true
		} else if cur == nil {
			return n.historyEvent(ch, why, now)
		}
		if fresh {
			n.unindex(cur)
		}
		return regEvent(ch, cur, why, now), true
	}
	e := cur
	if e == nil || string(e.raw) != string(ch.Value) {
		var err error
		if e, err = n.sharedEntry(ch); err != nil {
			n.log.Warn("registry: dropping an unreadable shared record", "kind", ch.Kind, "key", ch.Key, "err", err)
			return Event{}, false
		}
	}
	if fresh && ch.Kind == kindDescriptor && e.RegisteredAt.After(n.marks[e.Key]) {
		n.marks[e.Key] = e.RegisteredAt // a descriptor is its own watermark
	}
	if fresh && e != cur {
		if cur != nil && owner == "" && ch.Kind == kindLocal {
			// This node's own registration: its memory (renewed by
			// heartbeats) is authoritative for its TTL.
			e.ExpiresAt = cur.ExpiresAt
		}
		n.index(e)
	}
	return regEvent(ch, e, why, now), true
}

// regEvent is the event of a registration change whose entry is e.
func regEvent(ch Change, e *entry, why map[string]whyRecord, now time.Time) Event {
	ev := Event{Key: e.Key, Name: e.Name, Capabilities: e.Capabilities, Endpoint: e.Endpoint, Source: e.Source}
	switch {
	case ch.Delete:
		ev.Kind = EventExpired
		if w, ok := why[whyKey(ch.Kind, ch.Key, ch.Node)]; ok {
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
// certificates, the CRL or the spent nonces. The caller holds wmu and mu.
func (n *Node) applyTrust(ch Change) {
	t := n.trust
	switch ch.Kind {
	case kindMark:
		if ch.Delete {
			delete(n.marks, ch.Key)
			return
		}
		var at time.Time
		if json.Unmarshal(ch.Value, &at) == nil {
			n.marks[ch.Key] = at
		}
	case kindCert:
		if ch.Delete {
			return
		}
		var cs certState
		if json.Unmarshal(ch.Value, &cs) != nil {
			return
		}
		c, err := descriptor.ParseJoinCertificate(cs.Cert)
		if err != nil {
			return
		}
		cs.cert = c
		if cur, ok := t.certs[c.CertID]; ok {
			cur.Status, cur.RevocationReason = cs.Status, cs.RevocationReason
			if cs.Status == "revoked" && cs.RevocationReason == ReasonKeyCompromise {
				t.compromised[c.NodePublicKey] = true
			}
			t.changed(c.NodePublicKey)
			return
		}
		t.addCert(&cs)
	case kindCRL:
		if ch.Key != "active" || ch.Delete {
			return
		}
		if c, err := descriptor.ParseCRL(ch.Value); err == nil {
			t.crl = c
		}
	case kindNonce:
		if !ch.Delete {
			n.nonces[ch.Key] = ch.ExpiresAt
		}
	}
}

// record appends evs to the watch history at revision rev (shared mode)
// and wakes the watchers. The caller holds mu.
func (n *Node) record(evs []Event, rev uint64, now time.Time) {
	for _, ev := range evs {
		if n.cfg.Observer != nil {
			n.cfg.Observer.OnChange(ev.Kind)
		}
		ev.Revision, ev.At = rev, now
		n.events = append(n.events, ev)
	}
	if len(n.events) >= 2*n.cfg.WatchHistory {
		over := len(n.events) - n.cfg.WatchHistory
		for over < len(n.events) && n.events[over].Revision == n.events[over-1].Revision {
			over++ // a revision's events (one transaction's) go together
		}
		n.events = append(make([]Event, 0, 2*n.cfg.WatchHistory), n.events[over:]...)
	}
	if rev > n.version {
		n.version = rev
	}
	close(n.changed)
	n.changed = make(chan struct{})
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
	live := map[string]bool{}
	for _, ch := range chs {
		live[revKey(ch.Kind, ch.Key, n.owner(ch))] = true
		n.applyChange(ch, nil, now)
	}
	for k := range n.revs {
		if live[k] {
			continue
		}
		ch := Change{Revision: rev}
		ch.Kind, ch.Key, _ = strings.Cut(k, "\x00")
		if kk, node, ok := strings.Cut(ch.Key, "\x00"); ok && ch.Kind == kindLocal {
			ch.Key, ch.Node = kk, node // a nonce's key holds \x00 too
		}
		ch.Delete = true
		n.applyChange(ch, nil, now) // unindexes a registration
	}
	n.events = nil
	clear(n.tomb)
	n.record(nil, rev, now)
	return nil
}

// indexKey is the index key of a registration change.
func (n *Node) indexKey(ch Change) string {
	if o := n.owner(ch); o != "" {
		return ch.Key + "@" + o
	}
	return ch.Key
}

// sharedHistory is the watch history (since, upto] read back from the
// store, for a cursor older than this node's memory (a restart).
func (n *Node) sharedHistory(ctx context.Context, since, upto uint64) ([]Event, error) {
	chs, err := n.shared.History(ctx, since, upto)
	if err != nil {
		return nil, err
	}
	var out []Event
	now := n.cfg.Now()
	for i := 0; i < len(chs); {
		j := i
		for j < len(chs) && chs[j].Revision == chs[i].Revision {
			j++
		}
		why := whyOf(chs[i:j])
		for _, ch := range chs[i:j] {
			if ch.Kind != kindDescriptor && ch.Kind != kindLocal {
				continue
			}
			if ev, ok := n.historyEvent(ch, why, now); ok {
				ev.Revision, ev.At = ch.Revision, now
				out = append(out, ev)
			}
		}
		i = j
	}
	return out, nil
}

// historyEvent is the event of a past change, without the index.
func (n *Node) historyEvent(ch Change, why map[string]whyRecord, now time.Time) (Event, bool) {
	src := ch
	if ch.Delete {
		if ch.Prev == nil {
			return Event{}, false
		}
		src.Record = *ch.Prev
	}
	e, err := n.sharedEntry(src)
	if err != nil {
		return Event{}, false
	}
	return regEvent(ch, e, why, now), true
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
	n.mu.RLock()
	for _, ev := range n.events {
		if ev.Revision > upto && ev.Revision <= rev {
			ev.Capabilities = append([]string(nil), ev.Capabilities...)
			hist = append(hist, ev)
		}
	}
	n.mu.RUnlock()
	out := hist[:0]
	for _, ev := range hist {
		if matchCaps(ev.Capabilities, caps) {
			out = append(out, ev)
		}
	}
	return rev, out, nil
}

// registerShared is Register on a SharedStore: the checks under wmu, the
// conditional write without it (so that registrations of different keys
// go to the store side by side), the publication under wmu again unless
// the feed already holds something newer.
func (n *Node) registerShared(ctx context.Context, raw []byte, d *descriptor.Descriptor, now time.Time) (Entry, error) {
	n.wmu.Lock()
	e, ops, _, same, err := n.admitLocked(d, raw, now)
	if same != nil || err != nil {
		defer n.wmu.Unlock()
		if same != nil {
			return n.view(same, now), nil
		}
		return Entry{}, err
	}
	dk, mk := revKey(kindDescriptor, e.Key, ""), revKey(kindMark, e.Key, "")
	conds := []Cond{{Kind: kindDescriptor, Key: e.Key, Rev: n.revs[dk]}}
	// The stored descriptor is its own watermark (its registered_at); a
	// separate watermark record is written only when an older descriptor
	// could outlive this one (it expires later), or on deletion.
	if cur, had := n.entries[e.Key]; had && cur.ExpiresAt.After(e.ExpiresAt) {
		conds = append(conds, Cond{Kind: kindMark, Key: e.Key, Rev: n.revs[mk]})
		ops[1].ExpiresAt = cur.ExpiresAt.Add(n.cfg.Skew) // as long as the older one lives
	} else {
		ops = ops[:1]
	}
	n.wmu.Unlock()
	rev, err := n.shared.ApplyIf(ctx, conds, ops...)
	if err != nil {
		return Entry{}, n.storeError(err)
	}
	n.wmu.Lock()
	defer n.wmu.Unlock()
	if n.revs[dk] < rev {
		n.revs[dk] = rev
		if len(ops) > 1 {
			n.revs[mk] = rev
		}
		n.publish(func() {
			n.marks[e.Key] = e.RegisteredAt
			n.index(e)
		})
	}
	return n.view(e, now), nil
}

// storeError turns a SharedStore error into the registry's refusal.
func (n *Node) storeError(err error) error {
	switch {
	case errors.Is(err, ErrConflict):
		return refuse(CodeWordConcurrentChange, "the registry changed on another node while this request was checked; retry it")
	case errors.Is(err, ErrUnavailable):
		return refuse(CodeWordStoreUnavailable, "the registry store cannot be reached; nothing was changed, retry later (%v)", err)
	}
	return err
}

// secretOfWinner is the key another node stored under name first, when
// err says this node lost that race on a shared store (nodes of a fleet
// starting at once on an empty registry).
func (n *Node) secretOfWinner(ctx context.Context, name string, err error) (ed25519.PrivateKey, bool) {
	var re *Error
	if n.shared == nil || !errors.As(err, &re) || re.Code != CodeWordConcurrentChange {
		return nil, false
	}
	rs, _ := n.shared.List(ctx, kindSecret, n.cfg.Now())
	for _, r := range rs {
		if r.Key == name && len(r.Value) == ed25519.SeedSize {
			return ed25519.NewKeyFromSeed(r.Value), true
		}
	}
	return nil, false
}
