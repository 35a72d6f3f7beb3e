package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/postgres/pgtest"
	"github.com/capmesh/capmesh/evidence/storetest"
)

// TestResultRidesWithItsBlock: a result put while its invocation's block
// (the queued block whose last record names the invocation id) is still
// queued is written inside that block's row, not as a row of its own; a
// result whose invocation has no such block gets its own row; a row of
// one block (D) and of two merged (C) both carry theirs; a block's
// results survive a replay of the block unchanged; and Results lists
// every result newest first even when one block carries results older and
// newer than a lone one.
func TestResultRidesWithItsBlock(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshDSN(t)
	s := open(t, dsn)
	defer s.Close()
	t0 := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	put := func(id string, sec int) {
		t.Helper()
		if err := s.PutResult(ctx, evidence.Result{InvocationID: id, At: t0.Add(time.Duration(sec) * time.Second),
			Data: fmt.Appendf(nil, `{"invocation_id":%q,"at":%d}`, id, sec)}); err != nil {
			t.Fatal(err)
		}
	}
	// Invocations inv-a and inv-b of correlation C, then a lone result
	// (no block names inv-lone) recorded between theirs.
	if _, err := s.Append(ctx, storetest.Event("C", "started", "inv-a"), storetest.Event("C", "completed", "inv-a")); err != nil {
		t.Fatal(err)
	}
	put("inv-a", 1)
	if _, err := s.Append(ctx, storetest.Event("C", "completed", "inv-b")); err != nil {
		t.Fatal(err)
	}
	put("inv-b", 3)
	put("inv-lone", 2)
	// inv-d alone in correlation D: a row that is one block.
	recs, err := s.Append(ctx, storetest.Event("D", "completed", "inv-d"))
	if err != nil {
		t.Fatal(err)
	}
	put("inv-d", 4)
	if err := s.Sync(ctx, recs[0].Sequence); err != nil {
		t.Fatal(err)
	}
	var lone, carrying int
	err = s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM evidence_result_log),
		(SELECT count(*) FROM evidence_blocks WHERE res_at IS NOT NULL)`).Scan(&lone, &carrying)
	if err != nil {
		t.Fatal(err)
	}
	if lone != 1 || carrying != 2 {
		t.Errorf("%d lone result rows and %d blocks carrying results, want 1 and 2 (inv-a and inv-b in C's block, inv-d in D's)", lone, carrying)
	}
	all, err := s.Replay(ctx, evidence.Query{CorrelationID: "C"})
	if err != nil || len(all) != 3 || verify(all) != nil {
		t.Fatalf("replay of C: %d records, %v, chain %v", len(all), err, verify(all))
	}
	if all, err = s.Replay(ctx, evidence.Query{CorrelationID: "D"}); err != nil || len(all) != 1 || verify(all) != nil {
		t.Fatalf("replay of D: %d records, %v", len(all), err)
	}
	var got []string
	err = s.Results(ctx, time.Time{}, func(r evidence.Result) bool {
		got = append(got, fmt.Sprintf("%s %s %s", r.InvocationID, r.At.Format(time.TimeOnly), r.Data))
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`inv-d 06:00:04 {"invocation_id":"inv-d","at":4}`,
		`inv-b 06:00:03 {"invocation_id":"inv-b","at":3}`,
		`inv-lone 06:00:02 {"invocation_id":"inv-lone","at":2}`,
		`inv-a 06:00:01 {"invocation_id":"inv-a","at":1}`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Results = %q, want %q", got, want)
	}
	got = got[:0]
	err = s.Results(ctx, t0.Add(2*time.Second), func(r evidence.Result) bool {
		got = append(got, r.InvocationID)
		return true
	})
	if err != nil || !slices.Equal(got, []string{"inv-d", "inv-b", "inv-lone"}) {
		t.Fatalf("Results since 06:00:02 = %q, %v", got, err)
	}
}
