package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/postgres/pgtest"
	"github.com/capmesh/capmesh/evidence/storetest"
)

// TestCloseRacesEverything: writers append (some batches over two
// correlations, some sealing slowly), put results, Sync under contexts
// cancelled at random moments, replay and read LastSequence, on a store
// with small sequence blocks (reservations ahead all the time), while a
// saboteur's wrong NewChain hints fail commits; Close comes in the
// middle of it all. Every call returns (no hang, no panic), with nil,
// the saboteur's conflict, ErrLost, a cancelled context or ErrClosed;
// no record appears at or below a LastSequence returned before its
// Append began; every record whose Sync returned nil is in the
// database, in chains that verify, and so is every result put before it.
func TestCloseRacesEverything(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshDSN(t)
	s2 := open(t, dsn)
	defer s2.Close()
	z, err := s2.Append(ctx, storetest.Event("Z", "e", "z"))
	if err != nil || s2.Sync(ctx, z[0].Sequence) != nil {
		t.Fatalf("append: %v", err)
	}
	s, err := Open(ctx, dsn, &Options{Block: 8, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	corrs := []string{"A", "B", "C", "D"}
	var (
		mu       sync.Mutex
		acked    = map[uint64]string{}
		ackedRes = map[string]bool{} // results put before a Sync that returned nil
		nacked   atomic.Int64
		lastSeen atomic.Uint64 // the highest LastSequence returned
	)
	seen := func() {
		l := s.LastSequence()
		for {
			old := lastSeen.Load()
			if l <= old || lastSeen.CompareAndSwap(old, l) {
				return
			}
		}
	}
	ok := func(err error) bool {
		return err == nil || errors.Is(err, evidence.ErrClosed) || errors.Is(err, ErrLost) ||
			errors.Is(err, context.Canceled) || isZConflict(err)
	}
	writer := func(g int) {
		rng := rand.New(rand.NewPCG(uint64(g), 7))
		var last uint64
		for i := 0; ; i++ {
			seen()
			floor := lastSeen.Load()
			corr := corrs[rng.IntN(len(corrs))]
			p := storetest.Event(corr, "e", fmt.Sprintf("%d-%d", g, i))
			if rng.IntN(3) == 0 {
				p.After = last
			}
			batch := []evidence.Pending{p}
			if rng.IntN(4) == 0 {
				batch = append(batch, storetest.Event(corrs[rng.IntN(len(corrs))], "e", "x"))
			}
			if rng.IntN(5) == 0 {
				inner, d := batch[0].Seal, time.Duration(rng.IntN(300))*time.Microsecond
				batch[0].Seal = func(seq uint64, prev string) (string, []byte, error) {
					time.Sleep(d)
					return inner(seq, prev)
				}
			}
			actx, acancel := context.WithCancel(ctx)
			if rng.IntN(8) == 0 {
				acancel()
			}
			recs, err := s.Append(actx, batch...)
			acancel()
			if errors.Is(err, evidence.ErrClosed) {
				return
			}
			if !ok(err) {
				t.Errorf("append: %v", detailed(err))
				return
			}
			if err != nil {
				continue
			}
			for _, r := range recs {
				if r.Sequence <= floor {
					t.Errorf("record %d appended after LastSequence returned %d", r.Sequence, floor)
				}
			}
			last = recs[0].Sequence
			var put string
			if rng.IntN(3) == 0 {
				id := fmt.Sprintf("%d-%d", g, i)
				err := s.PutResult(ctx, evidence.Result{InvocationID: id, At: time.Now(), Data: []byte("{}")})
				if !ok(err) {
					t.Errorf("put result: %v", err)
				}
				if err == nil {
					put = id
				}
			}
			sctx, scancel := context.WithCancel(ctx)
			if rng.IntN(6) == 0 {
				d := time.Duration(rng.IntN(200)) * time.Microsecond
				go func() { time.Sleep(d); scancel() }()
			}
			err = s.Sync(sctx, recs[len(recs)-1].Sequence)
			scancel()
			if !ok(err) {
				t.Errorf("sync: %v", detailed(err))
			}
			if err == nil {
				nacked.Add(1)
				mu.Lock()
				for _, r := range recs {
					acked[r.Sequence] = r.ContentHash
				}
				if put != "" {
					ackedRes[put] = true
				}
				mu.Unlock()
			}
			if rng.IntN(10) == 0 {
				if _, err := s.Replay(ctx, evidence.Query{CorrelationID: corr}); !ok(err) {
					t.Errorf("replay: %v", err)
				}
			}
		}
	}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() { writer(g) })
	}
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			w, err := s.Append(ctx, hinted("Z", fmt.Sprint("wrong-", i)))
			if err == nil {
				err = s.Sync(ctx, w[0].Sequence)
			}
			if errors.Is(err, evidence.ErrClosed) {
				return
			}
			if !ok(err) {
				t.Errorf("saboteur: %v", detailed(err))
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	waitFor(t, func() bool { return nacked.Load() >= 150 })
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		close(stop)
		t.Fatal("calls still running 60 s after Close")
	}
	close(stop)
	select {
	case <-closed:
	case <-time.After(60 * time.Second):
		t.Fatal("Close still running after 60 s")
	}
	mu.Lock()
	defer mu.Unlock()
	checkAcked(t, s2, corrs, acked)
	err = s2.Results(ctx, time.Time{}, func(r evidence.Result) bool {
		delete(ackedRes, r.InvocationID)
		return true
	})
	if err != nil || len(ackedRes) != 0 {
		t.Errorf("results: %v; %d put before a Sync that returned nil are not stored", err, len(ackedRes))
	}
	t.Logf("%d acknowledged Syncs", nacked.Load())
}

// isZConflict reports whether err is the database refusing a block of Z
// on the no-fork constraint.
func isZConflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.ConstraintName == "evidence_blocks_no_fork" && strings.Contains(pe.Detail, "(Z, ")
}

// TestAppendRacingCloseSaysClosed: an Append that passed its check of
// Close and reads a head from the database when Close closes the pool
// under it fails with evidence.ErrClosed, as every call after Close does,
// not with the pool's own error. The pool's one connection is held by a
// Results query whose callback waits, so the read waits for it until
// Close and then (a waiting acquire outlives the pool's Close) until
// the commit timeout, which bounds every read.
func TestAppendRacingCloseSaysClosed(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.FreshDSN(t), &Options{MaxConns: 1, Block: 1, CommitTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, at := range []time.Time{time.Now(), time.Now().Add(-time.Hour)} {
		// Two rows: the callback runs for the first while the second's
		// query holds the connection.
		if err := s.PutResult(ctx, evidence.Result{InvocationID: fmt.Sprint(i), At: at, Data: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	inside, release := make(chan struct{}), make(chan struct{})
	results := make(chan error, 1)
	var once sync.Once
	go func() {
		results <- s.Results(ctx, time.Time{}, func(evidence.Result) bool {
			once.Do(func() { close(inside); <-release })
			return true
		})
	}()
	<-inside
	appended := make(chan error, 1)
	go func() {
		_, err := s.Append(ctx, storetest.Event("Q", "e", "q")) // Q's head is not cached: it is read
		appended <- err
	}()
	waitFor(t, func() bool { s.lk.Lock(); defer s.lk.Unlock(); return s.lkBusy })
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	err = <-appended
	close(release)
	if !errors.Is(err, evidence.ErrClosed) {
		t.Errorf("Append racing Close = %v, want ErrClosed", err)
	}
	<-results
	if err := <-closed; err != nil {
		t.Errorf("close: %v", err)
	}
}
