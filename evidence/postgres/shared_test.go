package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/postgres/pgtest"
	"github.com/capmesh/capmesh/evidence/storetest"
)

// verify checks that recs (storetest events) form one chain from genesis
// in ascending sequence order.
func verify(recs []evidence.Record) error {
	prev := ""
	var last uint64
	for _, r := range recs {
		parts := strings.SplitN(string(r.Data), ":", 3)
		sum := sha256.Sum256(fmt.Appendf(nil, "%s|%d|%s", prev, r.Sequence, parts[2]))
		if r.PrevHash != prev || hex.EncodeToString(sum[:]) != r.ContentHash || r.Sequence <= last {
			return fmt.Errorf("chain broken at sequence %d", r.Sequence)
		}
		prev, last = r.ContentHash, r.Sequence
	}
	return nil
}

// TestTwoWritersNeverFork: a store that extends a correlation from a stale
// head (another store extended it meanwhile) has its commit refused by the
// database; its Sync reports the error, the record vanishes from its
// replay, the chain in the database stays one line, and the store's next
// append reads the head afresh and continues the chain at a sequence above
// the other writer's.
func TestTwoWritersNeverFork(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshDSN(t)
	s1, s2 := open(t, dsn), open(t, dsn)
	defer s1.Close()
	defer s2.Close()
	appendSync := func(s *Store, body string) (evidence.Record, error) {
		recs, err := s.Append(ctx, storetest.Event("A", "e", body))
		if err != nil {
			t.Fatal(err)
		}
		return recs[0], s.Sync(ctx, recs[0].Sequence)
	}
	if _, err := appendSync(s1, "1"); err != nil {
		t.Fatal(err)
	}
	r2, err := appendSync(s2, "2") // s2 reads A's head from the database
	if err != nil {
		t.Fatal(err)
	}
	stale, err := appendSync(s1, "3") // s1 still believes its own record is the head
	if err == nil || !strings.Contains(err.Error(), "evidence_events_no_fork") {
		t.Fatalf("Sync of a forking record = %v, want the no-fork refusal", err)
	}
	if recs, _ := s1.Replay(ctx, evidence.Query{CorrelationID: "A"}); len(recs) != 2 {
		t.Fatalf("after the refusal s1 replays %d records, want 2", len(recs))
	}
	r4, err := appendSync(s1, "4")
	if err != nil {
		t.Fatalf("append after the refusal: %v", err)
	}
	if r4.PrevHash != r2.ContentHash || r4.Sequence <= r2.Sequence || r4.Sequence == stale.Sequence {
		t.Fatalf("s1 continued at %d after %q, want after s2's %d", r4.Sequence, r4.PrevHash, r2.Sequence)
	}
	recs, err := s2.Replay(ctx, evidence.Query{CorrelationID: "A"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("database holds %d records of A, want 3", len(recs))
	}
	if err := verify(recs); err != nil {
		t.Fatal(err)
	}
}

// TestManyWritersShareOneDatabase: four stores (four hosts) append from
// four goroutines each to correlations they share. Contended commits may
// be refused, but every acknowledged record is kept, sequences are unique,
// and every chain verifies.
func TestManyWritersShareOneDatabase(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshDSN(t)
	const writers, goroutines, each = 4, 4, 40
	var (
		mu      sync.Mutex
		acked   = map[uint64]string{}
		refused int
		wg      sync.WaitGroup
	)
	stores := make([]*Store, writers)
	for w := range stores {
		stores[w] = open(t, dsn)
	}
	for w := range writers {
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					corr := fmt.Sprint("m", (w+g+i)%6)
					recs, err := stores[w].Append(ctx, storetest.Event(corr, "e", fmt.Sprint(w, g, i)), storetest.Event(corr, "f", "x"))
					if err != nil {
						t.Error(err)
						return
					}
					err = stores[w].Sync(ctx, recs[1].Sequence)
					mu.Lock()
					if err != nil {
						refused++
					} else {
						acked[recs[0].Sequence], acked[recs[1].Sequence] = corr, corr
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	for _, s := range stores {
		if err := s.Close(); err != nil && !strings.Contains(err.Error(), "commit") {
			t.Fatal(err)
		}
	}
	s := open(t, dsn)
	defer s.Close()
	kept := map[uint64]bool{}
	for c := range 6 {
		recs, err := s.Replay(ctx, evidence.Query{CorrelationID: fmt.Sprint("m", c)})
		if err != nil {
			t.Fatal(err)
		}
		if err := verify(recs); err != nil {
			t.Fatalf("m%d: %v", c, err)
		}
		for _, r := range recs {
			kept[r.Sequence] = true
		}
	}
	for seq, corr := range acked {
		if !kept[seq] {
			t.Fatalf("acknowledged record %d of %s lost", seq, corr)
		}
	}
	if len(acked) == 0 {
		t.Fatal("nothing was acknowledged")
	}
	t.Logf("%d records acknowledged, %d invocations refused", len(acked), refused)
}

// TestAppendOnlyInTheDatabase: even a client holding the schema owner's
// role cannot change or remove evidence.
func TestAppendOnlyInTheDatabase(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshDSN(t)
	s := open(t, dsn)
	recs, err := s.Append(ctx, storetest.Event("c", "e", "1"))
	if err == nil {
		err = s.Sync(ctx, recs[0].Sequence)
	}
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{`UPDATE evidence_events SET data = '\x00'`, `DELETE FROM evidence_events`, `TRUNCATE evidence_events`} {
		if _, err := conn.Exec(ctx, q); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: %v, want the append-only refusal", q, err)
		}
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM evidence_events`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d records (%v), want 1", n, err)
	}
}

// TestSynchronousCommitForced: the store commits with synchronous_commit
// on even when the DSN (or the server) asks for off.
func TestSynchronousCommitForced(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.Param(pgtest.FreshDSN(t), "synchronous_commit", "off"))
	defer s.Close()
	var v string
	if err := s.pool.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&v); err != nil || v != "on" {
		t.Fatalf("synchronous_commit = %q (%v), want on", v, err)
	}
}

// execOn runs sql on the database dsn names.
func execOn(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// schemaOf is the schema dsn's search_path names.
func schemaOf(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil || cfg.RuntimeParams["search_path"] == "" {
		t.Fatalf("no search_path in %s: %v", dsn, err)
	}
	return cfg.RuntimeParams["search_path"]
}
