package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/postgres/pgtest"
	"github.com/capmesh/capmesh/evidence/storetest"
)

// rowBody is the body columns lays out for the row of corr among the
// queued items, and the records it decodes to.
func rowBody(t *testing.T, s *Store, corr string) ([]byte, []evidence.Record) {
	t.Helper()
	s.mu.Lock()
	batch := slices.Clone(s.queue)
	s.mu.Unlock()
	cols, _, err := columns(batch)
	if err != nil {
		t.Fatal(err)
	}
	corrs, prevs, lasts, bodies := cols[0].([]string), cols[1].([]int64), cols[2].([]int64), cols[3].([][]byte)
	for i, c := range corrs {
		if c != corr {
			continue
		}
		at := cols[6].([]pgtype.Timestamptz)[i]
		recs, err := decodeBlock(corr, blockRow{prev: uint64(prevs[i]), last: uint64(lasts[i]), body: bodies[i], resAt: at.Time})
		if err != nil {
			t.Fatalf("the row of %s does not decode: %v", corr, err)
		}
		return bodies[i], recs
	}
	t.Fatalf("no row of %s", corr)
	return nil, nil
}

// TestPrecompressedRows: Sync's caller encodes the row its record will be
// written in — the blocks of its correlation queued before and after the
// record's, skipping other correlations' — and the commit takes that body
// as it is; when the row gained a block or a result since, the commit
// encodes it again, and what is stored is the whole row either way.
func TestPrecompressedRows(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.FreshDSN(t))
	defer s.Close()
	a1, err := s.Append(ctx, storetest.Event("A", "e", "1"), storetest.Event("A", "e", "2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, storetest.Event("B", "e", "3")); err != nil {
		t.Fatal(err)
	}
	a2, err := s.Append(ctx, storetest.Event("A", "e", "4"))
	if err != nil {
		t.Fatal(err)
	}

	// The record of the second block of A: the row starts at the first.
	s.precompress(a2[0].Sequence)
	s.mu.Lock()
	first := s.queue[0].blk
	s.mu.Unlock()
	pre := first.pre.Load()
	if pre == nil || pre.recs != 3 || pre.err != nil {
		t.Fatalf("precompressed %+v, want the row of A's 3 records", pre)
	}
	body, recs := rowBody(t, s, "A")
	if &body[0] != &pre.body[0] {
		t.Fatal("the commit encoded again a row that was encoded ahead")
	}
	if len(recs) != 3 || recs[2].ContentHash != a2[0].ContentHash || recs[0].ContentHash != a1[0].ContentHash {
		t.Fatalf("the precompressed row decodes to %d records", len(recs))
	}

	// A result rides with A's last block after the row was encoded.
	if err := s.PutResult(ctx, evidence.Result{InvocationID: "4", At: time.Now(), Data: []byte(`{"r":4}`)}); err != nil {
		t.Fatal(err)
	}
	if body, _ := rowBody(t, s, "A"); &body[0] == &pre.body[0] {
		t.Fatal("the commit took a body encoded before the row's result")
	}
	// And a block extends the row.
	a3, err := s.Append(ctx, storetest.Event("A", "e", "5"))
	if err != nil {
		t.Fatal(err)
	}
	s.precompress(a2[0].Sequence) // the same row, now larger
	if p := first.pre.Load(); p == pre || p.recs != 4 || p.results != 1 {
		t.Fatalf("encoded again: %+v, want 4 records and a result", p)
	}
	a4, err := s.Append(ctx, storetest.Event("A", "e", "6"))
	if err != nil {
		t.Fatal(err)
	}
	if _, recs := rowBody(t, s, "A"); len(recs) != 5 || recs[4].ContentHash != a4[0].ContentHash {
		t.Fatalf("the row decodes to %d records, want 5", len(recs))
	}

	if err := s.Sync(ctx, a4[0].Sequence); err != nil {
		t.Fatal(err)
	}
	got, err := s.Replay(ctx, evidence.Query{CorrelationID: "A"})
	if err != nil || len(got) != 5 || verify(got) != nil || got[3].ContentHash != a3[0].ContentHash {
		t.Fatalf("replay: %d records, %v, chain %v", len(got), err, verify(got))
	}
	var results int
	if err := s.Results(ctx, time.Time{}, func(evidence.Result) bool { results++; return true }); err != nil || results != 1 {
		t.Fatalf("%d results (%v), want 1", results, err)
	}
}

// TestPrecompressTaken: a record whose block a commit has taken, or that
// is not queued, is not encoded again.
func TestPrecompressTaken(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.FreshDSN(t))
	defer s.Close()
	a, err := s.Append(ctx, storetest.Event("A", "e", "1"))
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	blk := s.queue[0].blk
	s.taken = s.pos // as a commit in flight does
	s.mu.Unlock()
	s.precompress(a[0].Sequence)
	s.precompress(a[0].Sequence + 1000)
	if blk.pre.Load() != nil {
		t.Fatal("a taken block was encoded ahead")
	}
	if err := s.Sync(ctx, a[0].Sequence); err != nil {
		t.Fatal(err)
	}
}

// TestPrecompressBounded: a caller of Sync looks at no more than the
// newest carryScan queued items (it holds the store lock, and the queue
// grows with every waiting caller while a commit is in flight): a row
// whose first block is further back is left to the commit, which writes
// it whole; a block that starts a chain (prev_seq 0) is its row's first
// wherever the queue begins.
func TestPrecompressBounded(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.FreshDSN(t))
	defer s.Close()
	a1, err := s.Append(ctx, storetest.Event("A", "e", "1"))
	if err != nil {
		t.Fatal(err)
	}
	var others []evidence.Pending
	for i := range carryScan + 8 {
		others = append(others, storetest.Event(fmt.Sprint("o", i), "e", "x"))
	}
	if _, err := s.Append(ctx, others...); err != nil { // one block each
		t.Fatal(err)
	}
	a2, err := s.Append(ctx, storetest.Event("A", "e", "2"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Append(ctx, storetest.Event("B", "e", "3"))
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	n := len(s.queue)
	firstA, lastA, blkB := s.queue[0].blk, s.queue[n-2].blk, s.queue[n-1].blk
	s.mu.Unlock()
	if n != carryScan+11 || lastA.prevSeq != a1[0].Sequence || blkB.prevSeq != 0 {
		t.Fatalf("queue of %d items, A's second block after %d, B's after %d", n, lastA.prevSeq, blkB.prevSeq)
	}

	s.precompress(a2[0].Sequence)
	if firstA.pre.Load() != nil || lastA.pre.Load() != nil {
		t.Fatal("a row starting beyond the newest carryScan items was encoded ahead")
	}
	s.precompress(b[0].Sequence)
	if pre := blkB.pre.Load(); pre == nil || pre.recs != 1 {
		t.Fatalf("the row starting B's chain was not encoded ahead: %+v", pre)
	}

	if err := s.Sync(ctx, b[0].Sequence); err != nil {
		t.Fatal(err)
	}
	got, err := s.Replay(ctx, evidence.Query{CorrelationID: "A"})
	if err != nil || len(got) != 2 || verify(got) != nil || got[1].ContentHash != a2[0].ContentHash {
		t.Fatalf("replay of A: %d records, %v, chain %v", len(got), err, verify(got))
	}
}

// TestPrecompressNeverStale: callers append to shared correlations, put
// results that ride with their blocks and lone ones, and encode their
// rows ahead, while a leader lays out batches with columns as a commit
// does (and, every few batches, drops the cached heads as a failed commit
// does, or fails the batch: failLocked takes queued Appends along, some
// of them holding two correlations); every body a batch would write
// decodes to exactly the records
// and results of its row in that batch, whether encoded ahead or not.
// Under -race it also checks that the encoding ahead shares nothing
// unguarded with appends, results and the commit.
func TestPrecompressNeverStale(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.FreshDSN(t))
	defer s.Close()
	kick, callers := make(chan struct{}, 1), make(chan struct{})
	var batches, ahead int
	leader := make(chan error, 1)
	go func() { leader <- fakeCommits(s, kick, callers, &batches, &ahead) }()

	corrs := []string{"A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K", "L", "M", "N", "O", "P"}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 150 {
				id := fmt.Sprintf("inv-%d-%d", g, i)
				var ps []evidence.Pending
				for k := range 1 + (g+i)%3 {
					ps = append(ps, storetest.Event(corrs[(g*7+i)%len(corrs)], "e", fmt.Sprintf("%s-%d", id, k)))
				}
				if i%4 == 1 {
					ps = append(ps, storetest.Event(corrs[(g*5+i+3)%len(corrs)], "e", id+"-other"))
				}
				recs, err := s.Append(ctx, ps...)
				if errors.Is(err, errFakeCommit) {
					continue // chained to a batch the leader failed
				}
				if err == nil && i%2 == 0 {
					err = s.PutResult(ctx, evidence.Result{InvocationID: id, At: time.Now(), Data: []byte(`{"r":"` + id + `"}`)})
				}
				if err == nil && i%5 == 0 {
					err = s.PutResult(ctx, evidence.Result{InvocationID: "lone-" + id, At: time.Now(), Data: []byte("{}")})
				}
				if err != nil {
					t.Error(err)
					return
				}
				s.precompress(recs[len(recs)-1].Sequence)
				if i%4 != 2 {
					s.precompress(recs[0].Sequence)
				}
				select {
				case kick <- struct{}{}:
				default:
				}
			}
		})
	}
	wg.Wait()
	close(callers)
	if err := <-leader; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d batches, %d rows encoded ahead", batches, ahead)
}

// fakeCommits takes batches off s's queue as commit does, without
// writing them, until callers is closed and the queue is empty, and
// checks each with checkBatch.
func fakeCommits(s *Store, kick, callers <-chan struct{}, batches, ahead *int) error {
	for {
		select {
		case <-kick:
		case <-callers:
		}
		s.mu.Lock()
		batch := s.queue
		s.taken = s.pos
		s.mu.Unlock()
		if len(batch) == 0 {
			select {
			case <-callers:
				return nil
			default:
				continue
			}
		}
		n, err := checkBatch(batch)
		if err != nil {
			return err
		}
		*batches++
		*ahead += n
		s.mu.Lock()
		s.queue = append(s.queue[:0:0], s.queue[len(batch):]...)
		switch {
		case *batches%7 == 0:
			s.failLocked(batch, errFakeCommit)
		case *batches%5 == 0:
			s.dropHeads(nil, nil) // as a failed commit does
		}
		s.resolved.Store(batch[len(batch)-1].pos)
		s.mu.Unlock()
	}
}

// errFakeCommit is the error of the batches fakeCommits fails.
var errFakeCommit = errors.New("a failed commit (fake)")

// checkBatch lays batch out with columns and checks that each row's body
// holds exactly the records and results of the batch's blocks in its
// range; ahead is how many bodies were encoded ahead.
func checkBatch(batch []item) (ahead int, err error) {
	cols, _, err := columns(batch)
	if err != nil || cols == nil { // nil: only results queued again
		return 0, err
	}
	corrs, prevs, lasts, bodies := cols[0].([]string), cols[1].([]int64), cols[2].([]int64), cols[3].([][]byte)
	resAts := cols[6].([]pgtype.Timestamptz)
	for i, c := range corrs {
		var want []evidence.Record
		var wantRes []evidence.Result
		for _, it := range batch {
			if b := it.blk; b != nil && b.recs[0].CorrelationID == c && b.prevSeq >= uint64(prevs[i]) && lastSeq(b) <= uint64(lasts[i]) {
				want, wantRes = append(want, b.recs...), append(wantRes, b.results...)
				if e := b.pre.Load(); e != nil && len(e.body) > 0 && &e.body[0] == &bodies[i][0] {
					ahead++
				}
			}
		}
		recs, results, err := decodeBody(c, blockRow{prev: uint64(prevs[i]), last: uint64(lasts[i]), body: bodies[i], resAt: resAts[i].Time})
		if err != nil {
			return 0, fmt.Errorf("row %d of %s: %w", i, c, err)
		}
		if !slices.EqualFunc(recs, want, sameRecord) || !slices.EqualFunc(results, wantRes, sameResult) {
			return 0, fmt.Errorf("row (%d, %d] of %s holds %d records and %d results, want %d and %d, or differs",
				prevs[i], lasts[i], c, len(recs), len(results), len(want), len(wantRes))
		}
	}
	return ahead, nil
}

func sameRecord(a, b evidence.Record) bool {
	return a.Sequence == b.Sequence && a.ContentHash == b.ContentHash && a.PrevHash == b.PrevHash &&
		a.EventType == b.EventType && string(a.Data) == string(b.Data)
}

func sameResult(a, b evidence.Result) bool {
	return a.InvocationID == b.InvocationID && a.At.Equal(b.At) && string(a.Data) == string(b.Data)
}

// TestPrecompressSmallRows: a caller of Sync encodes its row ahead only
// while the row holds at most aheadBlocks blocks. Each caller whose
// record is in a row encodes all of it, so a row that grows by every
// caller (one correlation, many callers at once) is left to the commit,
// which encodes it once, and still writes it whole.
func TestPrecompressSmallRows(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.FreshDSN(t))
	defer s.Close()
	var last []evidence.Record
	for i := range aheadBlocks + 1 {
		recs, err := s.Append(ctx, storetest.Event("A", "e", fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		last = recs
		s.precompress(recs[0].Sequence)
		s.mu.Lock()
		first := s.queue[0].blk
		s.mu.Unlock()
		pre := first.pre.Load()
		if i < aheadBlocks && (pre == nil || pre.recs != i+1) {
			t.Fatalf("a row of %d blocks: encoded ahead %+v, want its %d records", i+1, pre, i+1)
		}
		if i == aheadBlocks && pre.recs != aheadBlocks {
			t.Fatalf("a row of %d blocks was encoded ahead (%d records)", i+1, pre.recs)
		}
	}
	if err := s.Sync(ctx, last[0].Sequence); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Replay(ctx, evidence.Query{CorrelationID: "A"}); err != nil || len(got) != aheadBlocks+1 || verify(got) != nil {
		t.Fatalf("replay: %d records, %v, chain %v", len(got), err, verify(got))
	}
}
