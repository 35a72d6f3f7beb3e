package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/postgres/pgtest"
	"github.com/capmesh/capmesh/evidence/storetest"
)

// TestSyncAfterEarlierRecordsFailed: an invocation appends its first
// records without a Sync (the boundary does, before the handler runs);
// another caller's commit takes them and fails (here, on a wrong NewChain
// hint in the same statement). The invocation's next append says which of
// its records it follows (evidence.Pending.After, as the boundary sets
// it): the store refuses it with ErrLost, so that no Sync of the
// invocation can vouch for a chain whose first records are gone. An
// append that names no earlier record (another caller's) goes on.
func TestSyncAfterEarlierRecordsFailed(t *testing.T) {
	ctx := context.Background()
	s1, _, _ := committedB(t)
	early, err := s1.Append(ctx, storetest.Event("A", "e", "1"), storetest.Event("A", "e", "2"))
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := s1.Append(ctx, hinted("B", "x")) // collides with s2's B: the statement fails
	if err != nil {
		t.Fatal(err)
	}
	if err := s1.Sync(ctx, wrong[0].Sequence); err == nil {
		t.Fatal("the wrong hint's commit succeeded")
	}
	next := storetest.Event("A", "e", "3")
	next.After = early[1].Sequence
	if _, err := s1.Append(ctx, next); !errors.Is(err, ErrLost) {
		t.Fatalf("append after the caller's lost records = %v, want ErrLost", err)
	}
	if recs, _ := s1.Replay(ctx, evidence.Query{CorrelationID: "A"}); len(recs) != 0 {
		t.Fatalf("A holds %d records after the refused append", len(recs))
	}
	other, err := s1.Append(ctx, storetest.Event("A", "e", "4")) // a new caller of A
	if err != nil || s1.Sync(ctx, other[0].Sequence) != nil {
		t.Fatalf("a new caller's append: %v", err)
	}
}

// TestFailedCommitDoesNotSpill: a commit fails while a later block of one
// of its correlations waits in the queue, chained to a block the database
// refused. That block can never be stored and its Sync gets the error;
// the next commit, which carries it and the blocks of others, must not
// fail because of it, nor may blocks appended after it chain to it.
func TestFailedCommitDoesNotSpill(t *testing.T) {
	ctx := context.Background()
	s1, _, dsn := committedB(t)
	// Hold the commit that the wrong hint fails until more is queued.
	release := holdInserts(t, dsn)
	if _, err := s1.Append(ctx, storetest.Event("A", "e", "1")); err != nil {
		t.Fatal(err)
	}
	failed := failingCommit(t, s1)

	after, err := s1.Append(ctx, storetest.Event("A", "e", "2")) // chained to A's first block, in the held commit
	if err != nil {
		t.Fatal(err)
	}
	other, err := s1.Append(ctx, hinted("C", "c"))
	if err != nil {
		t.Fatal(err)
	}
	release()
	if err := <-failed; err == nil {
		t.Fatal("the wrong hint's commit succeeded")
	}
	more, err := s1.Append(ctx, storetest.Event("A", "e", "3"))
	if err != nil {
		t.Fatal(err)
	}
	if more[0].PrevHash == after[0].ContentHash {
		t.Fatal("a block appended after the failure chained to one that failed with it")
	}
	if err := s1.Sync(ctx, other[0].Sequence); err != nil {
		t.Fatalf("a new chain's Sync after the failed commit: %v", err)
	}
	if err := s1.Sync(ctx, after[0].Sequence); err == nil {
		t.Fatal("Sync of a block chained to a refused one returned nil")
	}
	for corr, n := range map[string]int{"B": 1, "C": 1} {
		if recs, err := s1.Replay(ctx, evidence.Query{CorrelationID: corr}); err != nil || len(recs) != n || verify(recs) != nil {
			t.Errorf("replay %s: %d records, %v", corr, len(recs), err)
		}
	}
	if recs, err := s1.Replay(ctx, evidence.Query{CorrelationID: "A"}); err != nil || verify(recs) != nil ||
		slices.ContainsFunc(recs, func(r evidence.Record) bool { return r.Sequence <= after[0].Sequence }) {
		t.Errorf("replay A: %d records, %v, chain %v", len(recs), err, verify(recs))
	}
}

// waitFor polls cond until it holds, failing t after 30 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestResultFailureReported: a result put before a Sync is durable when
// that Sync returns nil (evidence.ResultStore). A commit that fails with
// a lone result — alone or beside blocks — fails the Syncs waiting for
// it, Sync(0) included; its results are queued again, so that once the
// database takes results again the next Sync stores them, and no later
// Sync fails.
func TestResultFailureReported(t *testing.T) {
	ctx := context.Background()
	s, grant := refusingResults(t)
	defer s.Close()
	put := func(id string) {
		t.Helper()
		if err := s.PutResult(ctx, evidence.Result{InvocationID: id, At: time.Now(), Data: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Append(ctx, storetest.Event("A", "e", "1")); err != nil {
		t.Fatal(err)
	}
	put("beside a block")
	if err := s.Sync(ctx, 0); err == nil {
		t.Fatal("Sync(0) = nil after the commit of its result, beside a block, failed")
	}
	put("alone")
	if err := s.Sync(ctx, 0); err == nil {
		t.Fatal("Sync(0) = nil after its lone result's commit failed")
	}
	grant()
	put("later")
	if err := s.Sync(ctx, 0); err != nil {
		t.Fatalf("Sync(0) after the database takes results again: %v", err)
	}
	if got := resultIDs(t, s); !slices.Equal(got, []string{"alone", "beside a block", "later"}) {
		t.Fatalf("Results = %q, want the failed results stored by their retries and the later one", got)
	}
}

// TestResultRetriedAfterAnyFailure: a lone result that another caller's
// commit took, and that failed for a reason other than a refused block
// (here the database refused the result itself), before the putter
// called Sync, is queued again: the putter's Sync stores it, or fails.
func TestResultRetriedAfterAnyFailure(t *testing.T) {
	ctx := context.Background()
	s, grant := refusingResults(t)
	defer s.Close()
	if err := s.PutResult(ctx, evidence.Result{InvocationID: "inv-p", At: time.Now(), Data: []byte(`{"ok":1}`)}); err != nil {
		t.Fatal(err)
	}
	other, err := s.Append(ctx, storetest.Event("X", "e", "1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(ctx, other[0].Sequence); err == nil {
		t.Fatal("the other caller's commit, holding a refused result, succeeded")
	}
	grant()
	serr := s.Sync(ctx, 0) // the putter's
	stored := slices.Contains(resultIDs(t, s), "inv-p")
	if serr == nil && !stored {
		t.Fatal("the putter's Sync returned nil, but its result is not stored")
	}
	if serr != nil || !stored {
		t.Fatalf("the putter's Sync = %v, result stored %v: want it retried and stored", serr, stored)
	}
}

// TestResultGivenUp: a result the database keeps refusing is in at most
// maxResultTries failed commits, each failing the Syncs that waited for
// it, once its patience has passed (none here); then the store gives it
// up, and later Syncs succeed.
func TestResultGivenUp(t *testing.T) {
	ctx := context.Background()
	s, grant := refusingResults(t)
	defer s.Close()
	s.patience = 0
	if err := s.PutResult(ctx, evidence.Result{InvocationID: "doomed", At: time.Now(), Data: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	for i := range maxResultTries {
		if err := s.Sync(ctx, 0); err == nil {
			t.Fatalf("Sync %d = nil while the database refuses the result", i+1)
		}
	}
	if err := s.Sync(ctx, 0); err != nil {
		t.Fatalf("Sync after the result was given up: %v", err)
	}
	grant()
	if err := s.PutResult(ctx, evidence.Result{InvocationID: "ok", At: time.Now(), Data: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if got := resultIDs(t, s); !slices.Equal(got, []string{"ok"}) {
		t.Fatalf("Results = %q, want only the result put after the grant", got)
	}
}

// refusingResults opens a store as a least-privileged role that may not
// insert recorded results; grant gives the right back.
func refusingResults(t *testing.T) (s *Store, grant func()) {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.FreshDSN(t)
	open(t, dsn).Close()
	wdsn, role := leastPrivilege(t, dsn)
	s = open(t, wdsn)
	if err := execOn(ctx, dsn, `REVOKE INSERT ON evidence_result_log FROM `+role); err != nil {
		t.Fatal(err)
	}
	return s, func() {
		t.Helper()
		if err := execOn(ctx, dsn, `GRANT INSERT ON evidence_result_log TO `+role); err != nil {
			t.Fatal(err)
		}
	}
}

// resultIDs is the invocation ids of s's recorded results, sorted.
func resultIDs(t *testing.T, s *Store) []string {
	t.Helper()
	var got []string
	if err := s.Results(context.Background(), time.Time{}, func(r evidence.Result) bool { got = append(got, r.InvocationID); return true }); err != nil {
		t.Fatalf("Results: %v", err)
	}
	slices.Sort(got)
	return got
}

// TestFailureHoldsOnlyItsRecords: a failed commit fails the records it
// held and those chained to them, not every sequence between its lowest
// and highest: records are sealed off the lock, so a batch placed before
// the commit took the queue but queued after it has sequences inside
// that span and is committed by the next commit. Its Sync returns nil,
// and its caller's next append (naming it in After) goes on.
func TestFailureHoldsOnlyItsRecords(t *testing.T) {
	ctx := context.Background()
	s1, s2, _ := committedB(t)
	a, err := s1.Append(ctx, storetest.Event("A", "e", "1"))
	if err != nil {
		t.Fatal(err)
	}
	sealing, release := make(chan struct{}, 1), make(chan struct{})
	slow := appendAsync(s1, held("E", sealing, release, nil)) // between A's and the wrong hint's
	<-sealing
	wrong, err := s1.Append(ctx, hinted("B", "x")) // collides with s2's B: the statement fails
	if err != nil {
		t.Fatal(err)
	}
	if err := s1.Sync(ctx, wrong[0].Sequence); err == nil {
		t.Fatal("the wrong hint's commit succeeded")
	}
	if err := s1.Sync(ctx, a[0].Sequence); err == nil {
		t.Fatal("Sync of a record of the failed commit returned nil")
	}
	close(release)
	e := within(t, slow)
	if e.err != nil {
		t.Fatal(e.err)
	}
	if s := e.recs[0].Sequence; s <= a[0].Sequence || s >= wrong[0].Sequence {
		t.Fatalf("E took sequence %d, not between %d and %d", s, a[0].Sequence, wrong[0].Sequence)
	}
	if err := s1.Sync(ctx, e.recs[0].Sequence); err != nil {
		t.Fatalf("Sync of a record the failed commit did not hold: %v", err)
	}
	if recs, err := s2.Replay(ctx, evidence.Query{CorrelationID: "E"}); err != nil || len(recs) != 1 {
		t.Fatalf("E in the database: %d records, %v", len(recs), err)
	}
	next := storetest.Event("E", "e", "2")
	next.After = e.recs[0].Sequence
	if n, err := s1.Append(ctx, next); err != nil {
		t.Fatalf("append after a committed record: %v", err)
	} else if err := s1.Sync(ctx, n[0].Sequence); err != nil {
		t.Fatal(err)
	}
}

// TestFailedCommitTakesWholeBatches: an Append is atomic, so a failed
// commit that takes a queued block along (it chains to the commit's
// blocks) takes the other blocks of that block's Append too, and the
// later blocks of their correlations: the Sync of the batch's last
// record returns the error, and nothing of the batch is stored.
func TestFailedCommitTakesWholeBatches(t *testing.T) {
	ctx := context.Background()
	s1, s2, dsn := committedB(t)
	// Hold the commit that the wrong hint fails until more is queued.
	release := holdInserts(t, dsn)
	failed := failingCommit(t, s1)

	both, err := s1.Append(ctx, storetest.Event("B", "e", "b2"), storetest.Event("A", "e", "a1")) // B's chains to the held commit
	if err != nil {
		t.Fatal(err)
	}
	more, err := s1.Append(ctx, storetest.Event("A", "e", "a2")) // chains to the batch's A
	if err != nil {
		t.Fatal(err)
	}
	release()
	if err := <-failed; err == nil {
		t.Fatal("the wrong hint's commit succeeded")
	}
	if err := s1.Sync(ctx, both[1].Sequence); err == nil {
		t.Fatal("Sync of a batch's last record returned nil, the batch's other block lost")
	}
	if err := s1.Sync(ctx, more[0].Sequence); err == nil {
		t.Fatal("Sync of a block chained to a lost batch returned nil")
	}
	if recs, err := s2.Replay(ctx, evidence.Query{CorrelationID: "A"}); err != nil || len(recs) != 0 {
		t.Fatalf("A holds %d records (%v): part of a lost batch was stored", len(recs), err)
	}
	next, err := s1.Append(ctx, storetest.Event("A", "e", "a3"))
	if err == nil {
		err = s1.Sync(ctx, next[0].Sequence)
	}
	if err != nil {
		t.Fatalf("A after the failure: %v", err)
	}
	if next[0].PrevHash != "" {
		t.Fatalf("A continues after %q, a record of the lost batch", next[0].PrevHash)
	}
}

// TestFailedCommitLeavesNoStaleRow: when a failed commit takes a queued
// Append along because of one of its blocks, the other correlations of
// that Append lose all their queued blocks, not only the later ones: a
// row encoded ahead from a kept earlier block would otherwise describe
// that block and a lost one, and a new block chained to the kept one
// would make the row look unchanged (the same count of records) to the
// commit, which would write the lost record in place of the new one.
func TestFailedCommitLeavesNoStaleRow(t *testing.T) {
	ctx := context.Background()
	s1, s2, dsn := committedB(t)
	// Hold the commit that the wrong hint fails until more is queued.
	release := holdInserts(t, dsn)
	failed := failingCommit(t, s1)

	a1, err := s1.Append(ctx, storetest.Event("A", "e", "a1"))
	if err != nil {
		t.Fatal(err)
	}
	lost, err := s1.Append(ctx, storetest.Event("B", "e", "b2"), storetest.Event("A", "e", "a2-lost"))
	if err != nil {
		t.Fatal(err)
	}
	s1.precompress(lost[1].Sequence) // A's row: a1 and a2-lost
	release()
	if err := <-failed; err == nil {
		t.Fatal("the wrong hint's commit succeeded")
	}
	a2, err := s1.Append(ctx, storetest.Event("A", "e", "a2-new"))
	if err != nil {
		t.Fatal(err)
	}
	// Committed by another caller's Sync, which encodes no row of A.
	if err := s1.Sync(ctx, 0); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if err := s1.Sync(ctx, a2[0].Sequence); err != nil {
		t.Fatalf("Sync of A's new record: %v", err)
	}
	recs, err := s2.Replay(ctx, evidence.Query{CorrelationID: "A"})
	if err != nil || verify(recs) != nil {
		t.Fatalf("replay A: %v, chain %v", err, verify(recs))
	}
	if len(recs) == 0 || recs[len(recs)-1].Sequence != a2[0].Sequence || !strings.HasSuffix(string(recs[len(recs)-1].Data), "a2-new") {
		t.Fatalf("A holds %d records, the last not the new one: %+v", len(recs), recs)
	}
	if len(recs) == 2 && recs[0].Sequence != a1[0].Sequence {
		t.Fatalf("A's first record is %d, want %d", recs[0].Sequence, a1[0].Sequence)
	}
}

// holdInserts locks evidence_blocks so that reads go on and inserts wait,
// until release (or the end of the test).
func holdInserts(t *testing.T, dsn string) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	tx, err := conn.Begin(ctx)
	if err == nil {
		_, err = tx.Exec(ctx, `LOCK TABLE evidence_blocks IN EXCLUSIVE MODE`)
	}
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestResultLostBeforeItsSync: a result put before a Sync is durable when
// that Sync returns nil (evidence.ResultStore), even when another
// caller's Sync led a commit that took the result and failed before the
// putter called its own Sync (the gateway puts a lone result and then
// calls Sync(0); the window between is any other caller's). The database
// refused the commit's blocks, not the result: the store queues the
// result again, so the putter's Sync stores it.
func TestResultLostBeforeItsSync(t *testing.T) {
	ctx := context.Background()
	s1, _, _ := committedB(t)
	if err := s1.PutResult(ctx, evidence.Result{InvocationID: "inv-1", At: time.Now(), Data: []byte(`{"ok":1}`)}); err != nil {
		t.Fatal(err)
	}
	// Another caller: a wrong NewChain hint fails the commit its Sync leads.
	wrong, err := s1.Append(ctx, hinted("B", "x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s1.Sync(ctx, wrong[0].Sequence); err == nil {
		t.Fatal("the wrong hint's commit succeeded")
	}
	// The putter's Sync, after the commit that held its result failed.
	serr := s1.Sync(ctx, 0)
	found := false
	if err := s1.Results(ctx, time.Time{}, func(r evidence.Result) bool {
		found = found || r.InvocationID == "inv-1"
		return true
	}); err != nil {
		t.Fatalf("results: %v", err)
	}
	if serr == nil && !found {
		t.Fatal("Sync(0) after PutResult returned nil, but the result is not stored")
	}
	if serr != nil || !found {
		t.Fatalf("Sync(0) = %v, result stored %v: want the result queued again and stored", serr, found)
	}
}

// committedB opens two stores on a fresh database and commits a record of
// correlation B through the second: a NewChain hint for B through the
// first (hinted) then makes its commit fail.
func committedB(t *testing.T) (s1, s2 *Store, dsn string) {
	t.Helper()
	ctx := context.Background()
	dsn = pgtest.FreshDSN(t)
	s1, s2 = open(t, dsn), open(t, dsn)
	t.Cleanup(func() { s1.Close(); s2.Close() })
	b, err := s2.Append(ctx, storetest.Event("B", "e", "b"))
	if err != nil || s2.Sync(ctx, b[0].Sequence) != nil {
		t.Fatalf("append: %v", err)
	}
	return s1, s2, dsn
}

// failingCommit queues on s1 a second genesis of B (see committedB) and
// starts the Sync that commits it, which fails; it returns once that
// commit has taken the queue, with the channel its error arrives on.
// Inserts held (holdInserts) keep the commit in flight meanwhile.
func failingCommit(t *testing.T, s1 *Store) <-chan error {
	t.Helper()
	ctx := context.Background()
	wrong, err := s1.Append(ctx, hinted("B", "x"))
	if err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, 1)
	go func() { failed <- s1.Sync(ctx, wrong[0].Sequence) }()
	waitFor(t, func() bool { s1.mu.Lock(); defer s1.mu.Unlock(); return s1.taken >= s1.pos })
	return failed
}
