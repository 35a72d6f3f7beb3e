package etcd_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/etcd"
)

// held is a store whose feed a test can hold between revisions (a node
// lagging behind etcd's watch while the others go on), and whose next
// conditional write it can hold after the node's checks, either before
// etcd sees it (a registration checked before another node's change,
// written after it) or after etcd stored it (its answer late).
type held struct {
	*etcd.Store
	feed sync.RWMutex // write-locked: the feed waits before its next revision
	// stepping: the feed delivers one revision per value sent on steps.
	stepping atomic.Bool
	steps    chan struct{}

	mu      sync.Mutex
	after   bool          // hold the next ApplyIf once stored, not before
	arrived chan struct{} // armed: closed when the next ApplyIf arrives (or is stored)
	release chan struct{} // which then waits for it
}

func (h *held) Follow(ctx context.Context, after uint64, fn func([]registry.Change)) error {
	return h.Store.Follow(ctx, after, func(chs []registry.Change) {
		if h.stepping.Load() {
			select {
			case <-h.steps:
			case <-ctx.Done():
				return
			}
		}
		h.feed.RLock()
		defer h.feed.RUnlock()
		fn(chs)
	})
}

func (h *held) ApplyIf(ctx context.Context, conds []registry.Cond, ops ...registry.Op) (uint64, error) {
	h.mu.Lock()
	arrived, release, after := h.arrived, h.release, h.after
	h.arrived, h.release = nil, nil
	h.mu.Unlock()
	if arrived == nil {
		return h.Store.ApplyIf(ctx, conds, ops...)
	}
	var rev uint64
	var err error
	if after {
		rev, err = h.Store.ApplyIf(ctx, conds, ops...)
	}
	close(arrived)
	select {
	case <-release:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if after {
		return rev, err
	}
	return h.Store.ApplyIf(ctx, conds, ops...)
}

// holdNextWrite arms h: its next ApplyIf closes the first channel
// returned and waits until the second is closed, before it is sent to
// etcd or, when stored is true, once etcd answered.
func (h *held) holdNextWrite(stored bool) (arrived <-chan struct{}, release chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.arrived, h.release, h.after = make(chan struct{}), make(chan struct{}), stored
	return h.arrived, h.release
}

// joinHeld starts a node on srv under prefix whose store a test holds,
// trusting the pinned node keys.
func joinHeld(t *testing.T, srv *etcdtest.Server, prefix string, pinned ...string) (*peer, *held) {
	t.Helper()
	return joinHeldAt(t, srv, prefix, nil, pinned...)
}

// joinHeldAt is joinHeld with the node's clock now (nil: the wall clock).
func joinHeldAt(t *testing.T, srv *etcdtest.Server, prefix string, now func() time.Time, pinned ...string) (*peer, *held) {
	t.Helper()
	st, err := etcd.Open(context.Background(), etcd.Options{Endpoints: srv.Endpoints(), Prefix: prefix, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	h := &held{Store: st}
	n, err := registry.NewNode(registry.Config{Store: h, Logger: quiet, SweepInterval: 100 * time.Millisecond, TrustedKeys: pinned, Now: now})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	p := &peer{Node: n, st: st}
	t.Cleanup(func() { p.Close(); _ = st.Close() })
	return p, h
}

// registerHeld starts p's registration of d with p's next write held by
// h (stored: once etcd has stored it) and returns when the write is
// held: closing release lets it go on, done gets the registration's error.
func registerHeld(ctx context.Context, t *testing.T, p *peer, h *held, d *descriptor.Descriptor, stored bool) (release chan struct{}, done <-chan error) {
	t.Helper()
	arrived, release := h.holdNextWrite(stored)
	ch := make(chan error, 1)
	go func() {
		_, err := p.Register(ctx, d)
		ch <- err
	}()
	select {
	case <-arrived:
	case err := <-ch:
		t.Fatalf("the registration ended before its write: %v", err)
	}
	return release, ch
}

// settle waits until every peer applied etcd's current revision.
func settle(t *testing.T, srv *etcdtest.Server, peers ...*peer) {
	t.Helper()
	rev := srv.Revision(t)
	waitFor(t, func() bool {
		for _, p := range peers {
			if p.Version() < rev {
				return false
			}
		}
		return true
	})
}

// TestRollbackRefusedOnALaggingNode: node a accepts a newer descriptor of
// a key and deletes it (leaving a watermark record); node b, whose feed
// has delivered neither, is handed the older descriptor. b must not
// store it: before, b's write was conditional on the descriptor's record
// only (absent in etcd again), so the rollback landed and every node
// served it. Now every registration is conditional on the watermark
// record too.
func TestRollbackRefusedOnALaggingNode(t *testing.T) {
	srv := etcdtest.Start(t)
	a := join(t, srv, "/rollback/", etcd.Options{})
	b, hb := joinHeld(t, srv, "/rollback/")
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	priv, key := nodeKey(t)
	if _, err := a.Enroll(ctx, key, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	waitTrusted(t, b, key)
	t0 := time.Now()
	older, newer := signedAt(t, priv, []string{"roll.back"}, t0, 7103), signedAt(t, priv, []string{"roll.back"}, t0.Add(time.Second), 7104)

	hb.feed.Lock()
	if _, err := a.Register(ctx, newer); err != nil {
		hb.feed.Unlock()
		t.Fatal(err)
	}
	if err := deleteSigned(ctx, a, priv, key, t0.Add(2*time.Second)); err != nil {
		hb.feed.Unlock()
		t.Fatal(err)
	}
	_, err := b.Register(ctx, older)
	hb.feed.Unlock()
	if errWord(err) != registry.CodeWordConcurrentChange {
		t.Errorf("the older descriptor on the lagging node: %v, want %s", err, registry.CodeWordConcurrentChange)
	}
	settle(t, srv, a, b)
	for name, p := range map[string]*peer{"a": a, "b": b} {
		if e, ok := p.Get(key); ok {
			t.Errorf("%s holds the rolled-back descriptor (%s)", name, e.Endpoint)
		}
		if _, err := p.Register(ctx, older); errWord(err) != descriptor.CodeRollback {
			t.Errorf("%s: the older descriptor once caught up: %v, want %s", name, err, descriptor.CodeRollback)
		}
	}
}

// TestRegistrationDeletedBeforeItsAnswer: node a's registration is
// stored, and before a takes it into its index, a's feed delivers it and
// then its deletion by node b. a must not index it afterwards: before, a
// published its own write whenever the revision it held of the key was
// older — none, once the deletion was applied — and served the deleted
// registration (until its expiry; no event would remove it). Now a
// publishes its write only while its feed has not reached that revision.
func TestRegistrationDeletedBeforeItsAnswer(t *testing.T) {
	srv := etcdtest.Start(t)
	a, ha := joinHeld(t, srv, "/lateanswer/")
	b, _ := joinHeld(t, srv, "/lateanswer/")
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	priv, key := nodeKey(t)
	if _, err := a.Enroll(ctx, key, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	waitTrusted(t, b, key)
	t0 := time.Now()

	release, done := registerHeld(ctx, t, a, ha, signedAt(t, priv, []string{"late.answer"}, t0, 7105), true)
	waitFor(t, func() bool { _, ok := b.Get(key); return ok })
	err := deleteSigned(ctx, b, priv, key, t0.Add(time.Second))
	if err == nil {
		settle(t, srv, a)
	}
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("a's registration: %v", err)
	}
	settle(t, srv, a, b)
	for name, p := range map[string]*peer{"a": a, "b": b} {
		if e, ok := p.Get(key); ok {
			t.Errorf("%s holds the registration b deleted (%s)", name, e.Endpoint)
		}
	}
}

// TestWatchCursorFromANodeAhead: a watcher moves from node a to node b
// with a's cursor while b's feed is still behind it. b must wait for its
// feed rather than refuse: before, the cursor was "ahead of the
// registry" (invalid_params, a client error) on any node a revision
// behind, though revisions are etcd's and the same on every node. Now a
// node on a shared store waits up to 5 s for its feed to reach a cursor
// ahead of it, then answers from there.
func TestWatchCursorFromANodeAhead(t *testing.T) {
	srv := etcdtest.Start(t)
	a, _ := joinHeld(t, srv, "/ahead/")
	b, hb := joinHeld(t, srv, "/ahead/")
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	priv, key := nodeKey(t)
	if _, err := a.Enroll(ctx, key, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	settle(t, srv, a, b)

	hb.feed.Lock()
	sa := a.Version()
	if _, err := a.Register(ctx, signedAt(t, priv, []string{"ahead.cap"}, time.Now(), 7106)); err != nil {
		hb.feed.Unlock()
		t.Fatal(err)
	}
	waitEvent(t, a, &sa, registry.EventRegistered, key) // sa: a's cursor past the registration
	go hb.feed.Unlock()
	rev, evs, err := b.Watch(ctx, sa, nil, 0)
	if err != nil {
		t.Fatalf("b, from a's cursor %d: %v", sa, err)
	}
	if rev < sa || len(evs) != 0 {
		t.Errorf("b, from a's cursor %d: revision %d, events %+v; want nothing new", sa, rev, evs)
	}
	if _, ok := b.Get(key); !ok {
		t.Error("b answered a's cursor without holding what it covers")
	}
}

// TestOwnDeletionNotUndoneByTheFeed: node a registers a descriptor and
// deletes it before its feed delivered the registration. When the feed
// then delivers the registration, a must not index it again: before, a
// deleted key left no revision behind, so the older put looked new and
// the deregistered registration was served again (until the feed brought
// the deletion). Now a node remembers the revision of its own deletions
// until its feed reaches them.
func TestOwnDeletionNotUndoneByTheFeed(t *testing.T) {
	srv := etcdtest.Start(t)
	a, h := joinHeld(t, srv, "/undo/")
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	priv, key := nodeKey(t)
	if _, err := a.Enroll(ctx, key, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	settle(t, srv, a)
	h.steps = make(chan struct{})
	h.stepping.Store(true)
	step := func() { // one revision through a's feed
		t.Helper()
		v := a.Version()
		select {
		case h.steps <- struct{}{}:
		case <-ctx.Done():
			t.Fatal("a's feed delivers nothing more")
		}
		waitFor(t, func() bool { return a.Version() > v })
	}
	t0 := time.Now()
	if _, err := a.Register(ctx, signedAt(t, priv, []string{"undo.cap"}, t0, 7107)); err != nil {
		t.Fatal(err)
	}
	put := srv.Revision(t)
	if err := deleteSigned(ctx, a, priv, key, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	last := srv.Revision(t)
	for a.Version() < put { // the registration, not yet the deletion
		step()
	}
	if e, ok := a.Get(key); ok {
		t.Errorf("a serves the registration it deleted (%s) once its feed delivers the registration", e.Endpoint)
	}
	for a.Version() < last {
		step()
	}
	if _, ok := a.Get(key); ok {
		t.Error("a holds the deleted registration once its feed caught up")
	}
}

// TestSameDescriptorAgainAfterADeletionElsewhere: node b holds a's
// registration of a descriptor; a deletes it, and b, whose feed has not
// delivered the deletion, is handed the same descriptor again. b must
// not acknowledge it: before, the same descriptor again was answered
// from memory as registered (idempotent), though etcd held nothing. Now
// on a shared store that answer is confirmed against etcd first (the
// record still at the revision the node holds), else concurrent_change;
// once caught up the descriptor is a replay of a deleted one.
func TestSameDescriptorAgainAfterADeletionElsewhere(t *testing.T) {
	srv := etcdtest.Start(t)
	a, _ := joinHeld(t, srv, "/again/")
	b, hb := joinHeld(t, srv, "/again/")
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	priv, key := nodeKey(t)
	if _, err := a.Enroll(ctx, key, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	d := signedAt(t, priv, []string{"again.cap"}, t0, 7108)
	if _, err := a.Register(ctx, d); err != nil {
		t.Fatal(err)
	}
	settle(t, srv, a, b)
	if _, err := b.Register(ctx, d); err != nil {
		t.Fatalf("the same descriptor again on b, still stored: %v", err)
	}

	hb.feed.Lock()
	if err := deleteSigned(ctx, a, priv, key, t0.Add(time.Second)); err != nil {
		hb.feed.Unlock()
		t.Fatal(err)
	}
	_, err := b.Register(ctx, d)
	hb.feed.Unlock()
	if errWord(err) != registry.CodeWordConcurrentChange {
		t.Errorf("the same descriptor again on b after a deleted it: %v, want %s", err, registry.CodeWordConcurrentChange)
	}
	settle(t, srv, a, b)
	if _, err := b.Register(ctx, d); errWord(err) != registry.CodeWordReplay {
		t.Errorf("once caught up: %v, want %s", err, registry.CodeWordReplay)
	}
}
