package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/postgres/pgtest"
	"github.com/capmesh/capmesh/evidence/storetest"
)

// TestFailuresNeverForkNorLie: invocations of a few shared correlations
// append twice (the second naming the first in After, as the boundary
// does), some with results, slow or panicking sealers, or a second
// correlation in the batch, and Sync their last record, on a store
// with small sequence blocks (reservations ahead all the time); a
// saboteur's wrong NewChain hints fail whole commits meanwhile. The
// only failures are the saboteur's conflict, ErrLost and the panics; the
// database's chains verify record by record (no block chains to a record
// it does not follow, which the database cannot see); and every
// invocation whose Sync returned nil has all its records in them, and its
// result, riding on its block, in the results; so has a lone result put
// before a Sync(0) that returned nil (the gateway), a commit of another
// caller having taken it and failed meanwhile or not.
func TestFailuresNeverForkNorLie(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // only matters when stuck
	defer cancel()
	dsn := pgtest.FreshDSN(t)
	s2 := open(t, dsn)
	defer s2.Close()
	z, err := s2.Append(ctx, storetest.Event("Z", "e", "z"))
	if err != nil || s2.Sync(ctx, z[0].Sequence) != nil {
		t.Fatalf("append: %v", err)
	}
	s, err := Open(ctx, dsn, &Options{Block: 16})
	if err != nil {
		t.Fatal(err)
	}
	corrs := []string{"A", "B", "C", "D", "E"}
	var (
		mu       sync.Mutex
		acked    = map[uint64]string{} // sequence → content hash of acknowledged invocations
		ackedRes = map[string]bool{}   // results put before a Sync that returned nil
		nacked   int
		nfail    int
	)
	expected := func(err error) bool {
		var pe *pgconn.PgError
		switch {
		case errors.Is(err, ErrLost), errors.Is(err, errSealPanic):
			return true
		case errors.As(err, &pe):
			return pe.ConstraintName == "evidence_blocks_no_fork" && strings.Contains(pe.Detail, "(Z, ")
		}
		return false
	}
	invoke := func(rng *rand.Rand, id string) (recs []evidence.Record, put []string, err error) {
		if rng.IntN(4) == 0 { // the gateway: a lone result, then Sync(0)
			if err := s.PutResult(ctx, evidence.Result{InvocationID: id, At: time.Now(), Data: []byte("{}")}); err != nil {
				return nil, nil, err
			}
			time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond) // another caller's commit may take it meanwhile
			return nil, []string{id}, s.Sync(ctx, 0)
		}
		corr := corrs[rng.IntN(len(corrs))]
		defer func() {
			if r := recover(); r != nil {
				err = errSealPanic
			}
		}()
		first := []evidence.Pending{storetest.Event(corr, "e", id+"-1")}
		if rng.IntN(4) == 0 {
			first = append(first, storetest.Event(corrs[rng.IntN(len(corrs))], "e", id+"-1b"))
		}
		if rng.IntN(6) == 0 {
			inner := first[0].Seal
			first[0].Seal = func(seq uint64, prev string) (string, []byte, error) {
				time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
				return inner(seq, prev)
			}
		}
		if rng.IntN(40) == 0 {
			first[len(first)-1].Seal = func(uint64, string) (string, []byte, error) { panic("sealer bug") }
		}
		r1, err := s.Append(ctx, first...)
		if err != nil {
			return nil, nil, err
		}
		var last uint64
		for _, r := range r1 {
			if r.CorrelationID == corr {
				last = r.Sequence
			}
		}
		second := storetest.Event(corr, "e", id+"-2")
		second.After = last
		if rng.IntN(2) == 0 {
			if err := s.PutResult(ctx, evidence.Result{InvocationID: id, At: time.Now(), Data: []byte("{}")}); err != nil {
				return nil, nil, err
			}
			put = append(put, id)
		}
		r2, err := s.Append(ctx, second)
		if err != nil {
			return nil, nil, err
		}
		recs = append(r1, r2...)
		return recs, put, s.Sync(ctx, r2[0].Sequence)
	}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range 80 {
				recs, put, err := invoke(rng, fmt.Sprintf("inv-%d-%d", g, i))
				mu.Lock()
				if err == nil {
					nacked++
					for _, r := range recs {
						acked[r.Sequence] = r.ContentHash
					}
					for _, id := range put {
						ackedRes[id] = true
					}
				} else if !expected(err) {
					t.Errorf("invocation %d-%d: unexpected error %v", g, i, detailed(err))
				}
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		for i := range 40 {
			w, err := s.Append(ctx, hinted("Z", fmt.Sprint("wrong-", i)))
			if err == nil {
				err = s.Sync(ctx, w[0].Sequence)
			}
			mu.Lock()
			if err != nil {
				nfail++
			}
			if err != nil && !expected(err) {
				t.Errorf("saboteur %d: unexpected error %v", i, detailed(err))
			}
			mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	})
	wg.Wait()
	_ = s.Close() // its last record may be one the saboteur lost
	if nfail == 0 || nacked == 0 {
		t.Fatalf("%d failed commits, %d acknowledged invocations: the test exercised nothing", nfail, nacked)
	}
	checkAcked(t, s2, corrs, acked)
	for _, id := range resultIDs(t, s2) {
		delete(ackedRes, id)
	}
	if len(ackedRes) != 0 {
		t.Errorf("%d results put before a Sync that returned nil are not stored", len(ackedRes))
	}
	t.Logf("%d acknowledged invocations, %d failed commits", nacked, nfail)
}

// detailed is err with the server's detail, when the server refused.
func detailed(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return err.Error() + " (" + pe.Detail + ")"
	}
	return err.Error()
}

// checkAcked checks, through s, that the chains of corrs verify and hold
// every acknowledged record (sequence → content hash) as acknowledged.
func checkAcked(t *testing.T, s *Store, corrs []string, acked map[uint64]string) {
	t.Helper()
	found := 0
	for _, c := range corrs {
		recs, err := s.Replay(context.Background(), evidence.Query{CorrelationID: c})
		if err != nil {
			t.Fatal(err)
		}
		if err := verify(recs); err != nil {
			t.Errorf("correlation %s: %v", c, err)
		}
		for _, r := range recs {
			if h, ok := acked[r.Sequence]; ok {
				if h != r.ContentHash {
					t.Errorf("record %d of %s: hash %s, acknowledged %s", r.Sequence, c, r.ContentHash, h)
				}
				found++
			}
		}
	}
	if found != len(acked) {
		t.Errorf("%d acknowledged records in the database, want %d", found, len(acked))
	}
}
