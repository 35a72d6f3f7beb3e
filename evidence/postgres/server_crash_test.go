package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/postgres/pgtest"
	"github.com/capmesh/capmesh/evidence/storetest"
)

// TestServerCrash: the server crashes (immediate stop, crash recovery at
// restart) under a host appending from four goroutines. Every record
// acknowledged before the crash survives it — synchronous_commit is on —
// invocations during the outage fail instead of being answered, and the
// same store goes on appending once the server is back, its chains intact.
func TestServerCrash(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshDSN(t)
	s, err := Open(ctx, dsn, &Options{CommitTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var (
		mu     sync.Mutex
		acked  = map[uint64]string{}
		nacked atomic.Int64
		failed atomic.Int64
		stop   atomic.Bool
		wg     sync.WaitGroup
	)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				corr := fmt.Sprint("k", (g+i)%8)
				recs, err := s.Append(ctx, storetest.Event(corr, "e", fmt.Sprint(g, "-", i)))
				if err == nil {
					err = s.Sync(ctx, recs[0].Sequence)
				}
				if err != nil {
					failed.Add(1)
					time.Sleep(10 * time.Millisecond) // the server is down: do not spin
					continue
				}
				mu.Lock()
				acked[recs[0].Sequence] = corr
				mu.Unlock()
				nacked.Add(1)
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()
	waitAcks := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for nacked.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("only %d acknowledgements (%d failures) after 60 s", nacked.Load(), failed.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitAcks(50)
	restart, err := pgtest.CrashServer()
	if err != nil {
		t.Skip(err)
	}
	before := nacked.Load()
	deadline := time.Now().Add(60 * time.Second)
	for failed.Load() == 0 && time.Now().Before(deadline) { // the host sees the server down
		time.Sleep(5 * time.Millisecond)
	}
	if err := restart(); err != nil {
		t.Fatal(err)
	}
	if failed.Load() == 0 {
		t.Fatal("no invocation failed while the server was down")
	}
	waitAcks(before + 50)
	stop.Store(true)
	wg.Wait()

	check := open(t, dsn)
	defer check.Close()
	for seq, corr := range acked {
		recs, err := check.Replay(ctx, evidence.Query{CorrelationID: corr, After: seq - 1, Limit: 1})
		if err != nil || len(recs) != 1 || recs[0].Sequence != seq {
			t.Fatalf("acknowledged record %d of %s lost (%v)", seq, corr, err)
		}
	}
	for c := range 8 {
		recs, err := check.Replay(ctx, evidence.Query{CorrelationID: fmt.Sprint("k", c)})
		if err != nil {
			t.Fatal(err)
		}
		if err := verify(recs); err != nil {
			t.Fatalf("k%d: %v", c, err)
		}
	}
	t.Logf("%d acknowledged records survived the crash, %d invocations failed during it", len(acked), failed.Load())
}
