package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/postgres/pgtest"
	"github.com/capmesh/capmesh/evidence/storetest"
)

// held is a record of correlation corr whose sealing waits until release
// is closed, then fails with fail if it is not nil; sealing tells that it
// has begun.
func held(corr string, sealing chan<- struct{}, release <-chan struct{}, fail error) evidence.Pending {
	inner := storetest.Event(corr, "e", "held")
	return evidence.Pending{CorrelationID: corr, EventType: "e", Seal: func(seq uint64, prev string) (string, []byte, error) {
		sealing <- struct{}{}
		<-release
		if fail != nil {
			return "", nil, fail
		}
		return inner.Seal(seq, prev)
	}}
}

type appended struct {
	recs []evidence.Record
	err  error
}

func appendAsync(s *Store, ps ...evidence.Pending) <-chan appended {
	out := make(chan appended, 1)
	go func() {
		recs, err := s.Append(context.Background(), ps...)
		out <- appended{recs, err}
	}()
	return out
}

// within waits for an append; the deadline only matters when the store
// is stuck.
func within(t *testing.T, c <-chan appended) appended {
	t.Helper()
	select {
	case a := <-c:
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("an append is stuck")
		return appended{}
	}
}

// TestSealingOutsideTheLock: while one Append seals its records (a
// sealer that blocks), an Append of another correlation goes through,
// and one of the same correlation waits for it and chains to its record.
func TestSealingOutsideTheLock(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.FreshDSN(t))
	defer s.Close()
	sealing, release := make(chan struct{}, 1), make(chan struct{})
	first := appendAsync(s, held("A", sealing, release, nil))
	<-sealing
	if b := within(t, appendAsync(s, storetest.Event("B", "e", "b"))); b.err != nil {
		t.Fatal(b.err)
	}
	second := appendAsync(s, storetest.Event("A", "e", "a2"))
	select {
	case a := <-second:
		t.Fatalf("an append of A went through while A's head was being sealed: %+v", a)
	case <-time.After(50 * time.Millisecond): // it can miss the fault, never invent it
	}
	close(release)
	a1, a2 := within(t, first), within(t, second)
	if a1.err != nil || a2.err != nil {
		t.Fatal(a1.err, a2.err)
	}
	if a2.recs[0].PrevHash != a1.recs[0].ContentHash {
		t.Fatalf("A's second record chains to %q, want %q", a2.recs[0].PrevHash, a1.recs[0].ContentHash)
	}
	if err := s.Sync(ctx, a2.recs[0].Sequence); err != nil {
		t.Fatal(err)
	}
	recs, err := s.Replay(ctx, evidence.Query{CorrelationID: "A"})
	if err != nil || len(recs) != 2 || verify(recs) != nil {
		t.Fatalf("replay A: %d records, %v, chain %v", len(recs), err, verify(recs))
	}
}

// TestSealingFailsAfterOthersPlaced: a batch whose sealing fails after
// another batch took later sequences queues nothing and leaves its
// correlation's head as the queue holds it: the next append continues
// the chain from the last queued record.
func TestSealingFailsAfterOthersPlaced(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.FreshDSN(t))
	defer s.Close()
	c1, err := s.Append(ctx, storetest.Event("C", "e", "c1"))
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("seal failed")
	sealing, release := make(chan struct{}, 1), make(chan struct{})
	failing := appendAsync(s, held("C", sealing, release, boom))
	<-sealing
	d := within(t, appendAsync(s, storetest.Event("D", "e", "d")))
	if d.err != nil {
		t.Fatal(d.err)
	}
	close(release)
	if f := within(t, failing); !errors.Is(f.err, boom) {
		t.Fatalf("Append = %v, want the seal error", f.err)
	}
	if got := s.LastSequence(); got != d.recs[0].Sequence {
		t.Fatalf("LastSequence %d, want D's %d", got, d.recs[0].Sequence)
	}
	c2, err := s.Append(ctx, storetest.Event("C", "e", "c2"))
	if err != nil {
		t.Fatal(err)
	}
	if c2[0].PrevHash != c1[0].ContentHash {
		t.Fatalf("C continues after %q, want %q", c2[0].PrevHash, c1[0].ContentHash)
	}
	if err := s.Sync(ctx, c2[0].Sequence); err != nil {
		t.Fatal(err)
	}
	recs, err := s.Replay(ctx, evidence.Query{CorrelationID: "C"})
	if err != nil || len(recs) != 2 || verify(recs) != nil {
		t.Fatalf("replay C: %d records, %v, chain %v", len(recs), err, verify(recs))
	}
}

// TestReservedAhead: a store reserves its next block of sequences before
// the current one runs out, off its lock, and a clean Close gives back
// both unused tails: a single writer's sequences have no gap across the
// restart.
func TestReservedAhead(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshDSN(t)
	s, err := Open(ctx, dsn, &Options{Block: 8})
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i := range 30 {
		recs, err := s.Append(ctx, storetest.Event("R", "e", "x"))
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && recs[0].Sequence != last+1 {
			t.Fatalf("append %d took sequence %d after %d: a gap", i, recs[0].Sequence, last)
		}
		last = recs[0].Sequence
		if err := s.Sync(ctx, last); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	ahead := s.spareHi != 0 || s.reserving != nil
	s.mu.Unlock()
	if !ahead {
		t.Fatal("no block reserved ahead after 30 appends of blocks of 8")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, dsn)
	defer s2.Close()
	recs, err := s2.Append(ctx, storetest.Event("R", "e", "y"))
	if err != nil {
		t.Fatal(err)
	}
	if recs[0].Sequence != last+1 {
		t.Fatalf("after the restart: sequence %d, want %d", recs[0].Sequence, last+1)
	}
}

// TestSealingLostWithAFailedCommit: an Append sealing records that chain
// to a block whose commit fails meanwhile queues nothing and fails with
// that commit's error (its records would chain to records the database
// does not hold); the correlation then continues from the database.
func TestSealingLostWithAFailedCommit(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshDSN(t)
	s1, s2 := open(t, dsn), open(t, dsn)
	defer s1.Close()
	defer s2.Close()
	committed, err := s1.Append(ctx, storetest.Event("X", "e", "1"))
	if err != nil || s1.Sync(ctx, committed[0].Sequence) != nil {
		t.Fatalf("append: %v", err)
	}
	wrong, err := s2.Append(ctx, hinted("X", "2")) // a second genesis: its commit fails
	if err != nil {
		t.Fatal(err)
	}
	sealing, release := make(chan struct{}, 1), make(chan struct{})
	after := appendAsync(s2, held("X", sealing, release, nil)) // chains to wrong
	<-sealing
	if err := s2.Sync(ctx, wrong[0].Sequence); err == nil {
		t.Fatal("the second genesis committed")
	}
	close(release)
	a := within(t, after)
	if a.err == nil || !strings.Contains(a.err.Error(), "evidence_blocks_no_fork") {
		t.Fatalf("Append chained to a lost record = %v, want the failed commit's error", a.err)
	}
	s2.mu.Lock()
	queued := len(s2.queue)
	s2.mu.Unlock()
	if queued != 0 {
		t.Fatalf("%d items queued after the lost append", queued)
	}
	next, err := s2.Append(ctx, storetest.Event("X", "e", "3"))
	if err != nil || s2.Sync(ctx, next[0].Sequence) != nil {
		t.Fatalf("append after the failure: %v", err)
	}
	if next[0].PrevHash != committed[0].ContentHash {
		t.Fatalf("X continues after %q, want the database's %q", next[0].PrevHash, committed[0].ContentHash)
	}
}

// TestSealerPanicReleasesHead: a sealer that panics (a caller's bug)
// leaves no mark on its correlation's head: the panic reaches the caller
// of Append, and the next Append of the correlation goes through and
// continues the chain from the last queued record instead of waiting
// forever for a seal that will never end.
func TestSealerPanicReleasesHead(t *testing.T) {
	s := open(t, pgtest.FreshDSN(t))
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // only matters when stuck
	defer cancel()
	p1, err := s.Append(ctx, storetest.Event("P", "e", "1"))
	if err != nil {
		t.Fatal(err)
	}
	bad := evidence.Pending{CorrelationID: "P", EventType: "e", Seal: func(uint64, string) (string, []byte, error) {
		panic("sealer bug")
	}}
	func() {
		defer func() {
			if r := recover(); r != "sealer bug" {
				t.Errorf("recovered %v, want the sealer's panic", r)
			}
		}()
		_, _ = s.Append(ctx, storetest.Event("Q", "e", "q"), bad)
	}()
	p2, err := s.Append(ctx, storetest.Event("P", "e", "2"))
	if err != nil {
		t.Fatalf("append after a sealer panicked: %v", err)
	}
	if p2[0].PrevHash != p1[0].ContentHash {
		t.Fatalf("P continues after %q, want %q", p2[0].PrevHash, p1[0].ContentHash)
	}
	q, err := s.Append(ctx, storetest.Event("Q", "e", "q2"))
	if err != nil {
		t.Fatalf("Q after the panicked batch: %v", err)
	}
	if q[0].PrevHash != "" {
		t.Fatalf("Q's record chains to %q: a record of the panicked batch was queued", q[0].PrevHash)
	}
	if err := s.Sync(ctx, q[0].Sequence); err != nil {
		t.Fatal(err)
	}
	recs, err := s.Replay(ctx, evidence.Query{CorrelationID: "P"})
	if err != nil || len(recs) != 2 || verify(recs) != nil {
		t.Fatalf("replay P: %d records, %v, chain %v", len(recs), err, verify(recs))
	}
}

// TestSealingFailsNoStaleLookup: an Append reads a correlation's head
// from the database without the lock, and uses it only if no cached
// head was dropped meanwhile (gen). A seal that fails on a committed
// head drops that head, so a read begun before it committed must not be
// taken over it: the next appended block would extend the older head, a
// fork the database refuses together with every block of its commit.
func TestSealingFailsNoStaleLookup(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshDSN(t)
	s1, s2 := open(t, dsn), open(t, dsn)
	defer s1.Close()
	defer s2.Close()
	b0, err := s2.Append(ctx, storetest.Event("B", "e", "0"))
	if err != nil || s2.Sync(ctx, b0[0].Sequence) != nil {
		t.Fatalf("append: %v", err)
	}
	// An Append of B that misses the cache reads B's head (as Append does)...
	s1.mu.Lock()
	gen := s1.gen
	s1.mu.Unlock()
	found, err := s1.lookup([]string{"B"})
	if err != nil || found["B"].seq != b0[0].Sequence {
		t.Fatalf("lookup: %+v, %v", found, err)
	}
	// ... while another extends B and commits it,
	b1, err := s1.Append(ctx, storetest.Event("B", "e", "1"))
	if err != nil || s1.Sync(ctx, b1[0].Sequence) != nil {
		t.Fatalf("append: %v", err)
	}
	// and a third fails to seal after it.
	sealing, release := make(chan struct{}, 1), make(chan struct{})
	failing := appendAsync(s1, held("B", sealing, release, errors.New("seal failed")))
	<-sealing
	close(release)
	if f := within(t, failing); f.err == nil {
		t.Fatal("the failing seal appended")
	}
	s1.mu.Lock()
	defer s1.mu.Unlock()
	if s1.gen != gen {
		return // the read is retried
	}
	pl, _, _, err := s1.place([]evidence.Pending{storetest.Event("B", "e", "2")}, found)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.queueSealed(pl, nil, errors.New("test done"))
	if got := pl.heads[pl.at("B")].seq; got != b1[0].Sequence {
		t.Fatalf("the next block of B extends record %d, want %d: the read before it was taken", got, b1[0].Sequence)
	}
}

// TestHeadBeyondTheReservedBlocks: another writer's head of a
// correlation beyond both this store's current block and the block it
// reserved ahead makes the store reserve a block above that head; the
// records chain, every sequence is taken once, and a clean Close gives
// back only what no one reserved after.
func TestHeadBeyondTheReservedBlocks(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshDSN(t)
	s1, err := Open(ctx, dsn, &Options{Block: 8})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, dsn, &Options{Block: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	seen := map[uint64]bool{}
	take := func(recs []evidence.Record, err error) []evidence.Record {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if seen[r.Sequence] {
				t.Fatalf("sequence %d taken twice", r.Sequence)
			}
			seen[r.Sequence] = true
		}
		return recs
	}
	for i := range 5 { // s1's block half used: the next one is reserved ahead
		take(s1.Append(ctx, storetest.Event("X", "e", fmt.Sprint(i))))
	}
	waitFor(t, func() bool { s1.mu.Lock(); defer s1.mu.Unlock(); return s1.spareHi != 0 })
	var f []evidence.Record
	for i := range 3 {
		f = take(s2.Append(ctx, storetest.Event("F", "e", fmt.Sprint(i))))
	}
	if err := s2.Sync(ctx, f[0].Sequence); err != nil {
		t.Fatal(err)
	}
	s1.mu.Lock()
	beyond := f[0].Sequence > s1.spareHi
	s1.mu.Unlock()
	if !beyond {
		t.Fatalf("F's head %d is not beyond s1's blocks", f[0].Sequence)
	}
	g := take(s1.Append(ctx, storetest.Event("F", "e", "s1"), storetest.Event("X", "e", "x")))
	if g[0].Sequence <= f[0].Sequence || g[0].PrevHash != f[0].ContentHash {
		t.Fatalf("s1's F record %d after %q, want after %d (%q)", g[0].Sequence, g[0].PrevHash, f[0].Sequence, f[0].ContentHash)
	}
	last := take(s1.Append(ctx, storetest.Event("X", "e", "last")))
	if err := s1.Sync(ctx, last[0].Sequence); err != nil {
		t.Fatal(err)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	s3 := open(t, dsn) // s2's cached head of F is stale
	defer s3.Close()
	after := take(s3.Append(ctx, storetest.Event("F", "e", "after")))
	if err := s3.Sync(ctx, after[0].Sequence); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"F", "X"} {
		recs, err := s2.Replay(ctx, evidence.Query{CorrelationID: c})
		if err != nil || verify(recs) != nil {
			t.Fatalf("replay %s: %v, chain %v", c, err, verify(recs))
		}
	}
}

// TestLastSequenceBelowSealing: LastSequence never passes a record still
// being sealed. A caller takes it as the point up to which the store
// holds everything (an export's completeness claim is "as of" it), and a
// record sealed off the lock is visible only once queued, after records
// of other correlations placed later.
func TestLastSequenceBelowSealing(t *testing.T) {
	s := open(t, pgtest.FreshDSN(t))
	defer s.Close()
	sealing, release := make(chan struct{}, 1), make(chan struct{})
	slow := appendAsync(s, held("X", sealing, release, nil))
	<-sealing
	y := within(t, appendAsync(s, storetest.Event("Y", "e", "y")))
	if y.err != nil {
		t.Fatal(y.err)
	}
	s.mu.Lock()
	var x uint64 // the sequence being sealed
	for _, h := range s.heads {
		if h.sealing != nil {
			x = y.recs[0].Sequence - 1
		}
	}
	s.mu.Unlock()
	if x == 0 {
		t.Fatal("X is not being sealed")
	}
	if got := s.LastSequence(); got >= x {
		t.Fatalf("LastSequence %d while record %d is being sealed", got, x)
	}
	close(release)
	if a := within(t, slow); a.err != nil || a.recs[0].Sequence != x {
		t.Fatalf("X: %+v", a)
	}
	if got := s.LastSequence(); got != y.recs[0].Sequence {
		t.Fatalf("LastSequence %d once sealed, want %d", got, y.recs[0].Sequence)
	}
}

// TestReservationFails: a reservation the database refuses fails the
// Appends that waited for it, and the next Append reserves again: the
// store is not left waiting on the failed reservation, and sequences
// start above everything reserved.
func TestReservationFails(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshDSN(t)
	open(t, dsn).Close()
	wdsn, role := leastPrivilege(t, dsn)
	if err := execOn(ctx, dsn, `REVOKE UPDATE ON evidence_meta FROM `+role); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, wdsn, &Options{Block: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Append(ctx, storetest.Event("R", "e", "0")); err == nil || !strings.Contains(err.Error(), "reserving sequences") {
		t.Fatalf("Append without a reservation = %v, want the reservation's error", err)
	}
	if err := execOn(ctx, dsn, `GRANT UPDATE ON evidence_meta TO `+role); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i := range 10 { // past the first block: one reserved ahead
		recs, err := s.Append(ctx, storetest.Event("R", "e", fmt.Sprint(i)))
		if err != nil {
			t.Fatalf("Append %d once the database takes reservations: %v", i, err)
		}
		if recs[0].Sequence <= last {
			t.Fatalf("sequence %d after %d", recs[0].Sequence, last)
		}
		last = recs[0].Sequence
	}
	if err := s.Sync(ctx, last); err != nil {
		t.Fatal(err)
	}
	recs, err := s.Replay(ctx, evidence.Query{CorrelationID: "R"})
	if err != nil || len(recs) != 10 || verify(recs) != nil {
		t.Fatalf("replay R: %d records, %v, chain %v", len(recs), err, verify(recs))
	}
}
