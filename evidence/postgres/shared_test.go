package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	if err == nil || !strings.Contains(err.Error(), "evidence_blocks_no_fork") {
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
						// An Append sealing on a head whose commit was
						// refused meanwhile fails with that refusal.
						var pe *pgconn.PgError
						if errors.As(err, &pe) && pe.ConstraintName == "evidence_blocks_no_fork" {
							mu.Lock()
							refused++
							mu.Unlock()
							continue
						}
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
// role cannot change or remove evidence or recorded results.
func TestAppendOnlyInTheDatabase(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshDSN(t)
	s := open(t, dsn)
	recs, err := s.Append(ctx, storetest.Event("c", "e", "1"))
	if err == nil {
		err = s.PutResult(ctx, evidence.Result{InvocationID: "i", At: time.Now(), Data: []byte("{}")})
	}
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
	for _, q := range []string{`UPDATE evidence_blocks SET body = '\x00'`, `DELETE FROM evidence_blocks`, `TRUNCATE evidence_blocks`,
		`UPDATE evidence_result_log SET body = '\x00'`, `DELETE FROM evidence_result_log`, `TRUNCATE evidence_result_log`} {
		if _, err := conn.Exec(ctx, q); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: %v, want the append-only refusal", q, err)
		}
	}
	var n, m int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM evidence_blocks), (SELECT count(*) FROM evidence_result_log)`).Scan(&n, &m); err != nil || n != 1 || m != 1 {
		t.Fatalf("%d blocks and %d results (%v), want 1 and 1", n, m, err)
	}
}

// TestResultsNeverOverwritten: two hosts sharing the database record a
// result for one invocation id (both executed it, neither had seen the
// other's). Both rows are kept — neither write overwrites the other — and
// Results lists them newest first, with the data each host wrote.
func TestResultsNeverOverwritten(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshDSN(t)
	s1, s2 := open(t, dsn), open(t, dsn)
	defer s1.Close()
	defer s2.Close()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, s := range []*Store{s1, s2} {
		if err := s.PutResult(ctx, evidence.Result{InvocationID: "inv-1", At: t0.Add(time.Duration(i) * time.Second),
			Data: fmt.Appendf(nil, `{"host":%d}`, i+1)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(ctx, 0); err != nil {
			t.Fatalf("host %d: %v", i+1, err)
		}
	}
	var got []string
	if err := s1.Results(ctx, time.Time{}, func(r evidence.Result) bool {
		got = append(got, fmt.Sprintf("%s %s %s", r.InvocationID, r.At.Format(time.TimeOnly), r.Data))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{`inv-1 03:04:06 {"host":2}`, `inv-1 03:04:05 {"host":1}`}
	if !slices.Equal(got, want) {
		t.Fatalf("Results = %q, want %q", got, want)
	}
}

// TestDatabaseRefusesOverlap: a client that writes blocks by hand, past
// any store, cannot store one (correlation, sequence) twice, nor fork a
// chain, nor point a block at a predecessor that does not exist.
func TestDatabaseRefusesOverlap(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshDSN(t)
	s := open(t, dsn)
	recs, err := s.Append(ctx, storetest.Event("c", "e", "1"), storetest.Event("c", "e", "2"), storetest.Event("c", "e", "3"))
	if err == nil {
		err = s.Sync(ctx, recs[2].Sequence)
	}
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	first, last := recs[0].Sequence, recs[2].Sequence
	insert := func(prev, l uint64) error {
		return execOn(ctx, dsn, fmt.Sprintf(`INSERT INTO evidence_blocks VALUES ('c', %d, %d, '\x01')`, prev, l))
	}
	for _, c := range []struct {
		name       string
		prev, l    uint64
		constraint string
	}{
		{"the same range again", 0, last, "evidence_blocks_no_fork"},
		{"a second genesis after", 0, last + 1, "evidence_blocks_no_fork"},
		{"a range inside, chained", first, last + 5, "evidence_blocks_chain"},
		{"chained before its predecessor", last, first, "evidence_blocks_order"},
		{"a missing predecessor", last + 1, last + 5, "evidence_blocks_chain"},
		{"an empty range", last, last, "evidence_blocks_order"},
	} {
		if err := insert(c.prev, c.l); err == nil || !strings.Contains(err.Error(), c.constraint) {
			t.Errorf("%s: %v, want the %s refusal", c.name, err, c.constraint)
		}
	}
	// The control: the one place a block can go; then it is taken.
	if err := insert(last, last+1); err != nil {
		t.Fatalf("the next block: %v", err)
	}
	if err := insert(last, last+3); err == nil || !strings.Contains(err.Error(), "evidence_blocks_no_fork") {
		t.Errorf("a fork: %v, want the no-fork refusal", err)
	}
	// A block read back whose body does not match its columns is an
	// error, never records.
	if _, err := open(t, dsn).Replay(ctx, evidence.Query{CorrelationID: "c"}); !errors.Is(err, errCorrupt) {
		t.Errorf("replay over a corrupt block: %v, want errCorrupt", err)
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
