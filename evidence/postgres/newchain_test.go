package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/postgres/pgtest"
	"github.com/capmesh/capmesh/evidence/storetest"
)

// hinted is storetest.Event marked evidence.Pending.NewChain.
func hinted(corr, body string) evidence.Pending {
	p := storetest.Event(corr, "e", body)
	p.NewChain = true
	return p
}

// TestNewChainWrongHint: a store trusts NewChain and reads no head, so a
// wrong hint — the correlation already has rows, written by another store
// on the database — makes it start a second chain, which the no-fork
// constraint refuses: the Syncs of that record and of the other record
// committed in the same statement return the error, nothing of that
// statement is stored, the chain in the database stays one line, and the
// store's next appends (no hint) continue it.
func TestNewChainWrongHint(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshDSN(t)
	s1, s2 := open(t, dsn), open(t, dsn)
	defer s1.Close()
	defer s2.Close()
	first, err := s1.Append(ctx, storetest.Event("A", "e", "1"))
	if err != nil || s1.Sync(ctx, first[0].Sequence) != nil {
		t.Fatalf("append: %v", err)
	}
	wrong, err := s2.Append(ctx, hinted("A", "2"))
	if err != nil {
		t.Fatal(err)
	}
	if wrong[0].PrevHash != "" {
		t.Fatalf("hinted record chained to %q: the store read the head", wrong[0].PrevHash)
	}
	other, err := s2.Append(ctx, storetest.Event("B", "e", "3")) // queued behind it: one statement
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []evidence.Record{other[0], wrong[0]} {
		if err := s2.Sync(ctx, r.Sequence); err == nil || !strings.Contains(err.Error(), "evidence_blocks_no_fork") {
			t.Fatalf("Sync(%d) = %v, want the no-fork refusal", r.Sequence, err)
		}
	}
	var rowsA, rowsB int
	if err := s2.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE corr = 'A'), count(*) FILTER (WHERE corr = 'B') FROM evidence_blocks`).
		Scan(&rowsA, &rowsB); err != nil || rowsA != 1 || rowsB != 0 {
		t.Fatalf("rows of A %d, of B %d (%v), want 1 and 0", rowsA, rowsB, err)
	}
	next, err := s2.Append(ctx, storetest.Event("A", "e", "4"), storetest.Event("B", "e", "5"))
	if err != nil || s2.Sync(ctx, next[1].Sequence) != nil {
		t.Fatalf("append after the refusal: %v", err)
	}
	if next[0].PrevHash != first[0].ContentHash {
		t.Fatalf("A continued after %q, want s1's %q", next[0].PrevHash, first[0].ContentHash)
	}
	for corr, n := range map[string]int{"A": 2, "B": 1} {
		recs, err := s1.Replay(ctx, evidence.Query{CorrelationID: corr})
		if err != nil || len(recs) != n || verify(recs) != nil {
			t.Fatalf("replay %s: %d records, %v, chain %v", corr, len(recs), err, verify(recs))
		}
	}
}

// TestNewChainHintAfterCachedHead: a store ignores NewChain for a
// correlation whose head it holds — queued or committed — and chains to
// that head; a hinted correlation it does not hold starts a chain.
func TestNewChainHintAfterCachedHead(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.FreshDSN(t))
	defer s.Close()
	a, err := s.Append(ctx, hinted("A", "1"))
	if err != nil {
		t.Fatal(err)
	}
	queued, err := s.Append(ctx, hinted("A", "2")) // its head is queued
	if err != nil || s.Sync(ctx, queued[0].Sequence) != nil {
		t.Fatalf("append: %v", err)
	}
	committed, err := s.Append(ctx, hinted("A", "3")) // its head is committed, still cached
	if err != nil || s.Sync(ctx, committed[0].Sequence) != nil {
		t.Fatalf("append: %v", err)
	}
	if a[0].PrevHash != "" || queued[0].PrevHash != a[0].ContentHash || committed[0].PrevHash != queued[0].ContentHash {
		t.Fatalf("chain %q → %q → %q", a[0].PrevHash, queued[0].PrevHash, committed[0].PrevHash)
	}
	recs, err := s.Replay(ctx, evidence.Query{CorrelationID: "A"})
	if err != nil || len(recs) != 3 || verify(recs) != nil {
		t.Fatalf("replay: %d records, %v", len(recs), err)
	}
}
