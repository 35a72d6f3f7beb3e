package postgres

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/postgres/pgtest"
	"github.com/capmesh/capmesh/evidence/storetest"
)

// oldChainTrigger is the chain trigger as schemas created before its WHEN
// clause hold it.
const oldChainTrigger = `CREATE OR REPLACE TRIGGER evidence_blocks_chain BEFORE INSERT ON evidence_blocks
	FOR EACH ROW EXECUTE FUNCTION evidence_blocks_chain()`

// chainTriggerDef is the definition of the chain trigger in s's schema.
func chainTriggerDef(t *testing.T, s *Store) string {
	t.Helper()
	var def string
	if err := s.pool.QueryRow(context.Background(), `SELECT pg_get_triggerdef(oid) FROM pg_trigger
		WHERE tgrelid = to_regclass('evidence_blocks') AND tgname = 'evidence_blocks_chain'`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	return def
}

// TestChainTriggerUpgraded: a schema whose chain trigger predates the
// WHEN clause (prev_seq 0 skips the function) gets the new definition
// when its owner opens it; a host whose role may not replace triggers
// opens it as before, with a warning, and the old trigger checks the
// same. Either way a missing predecessor is refused.
func TestChainTriggerUpgraded(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshDSN(t)
	open(t, dsn).Close()
	if err := execOn(ctx, dsn, oldChainTrigger); err != nil {
		t.Fatal(err)
	}

	var logged bytes.Buffer
	wdsn, role := leastPrivilege(t, dsn)
	w, err := Open(ctx, wdsn, &Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatalf("open as %s over the old trigger: %v", role, err)
	}
	if def := chainTriggerDef(t, w); strings.Contains(def, "WHEN") {
		t.Fatalf("%s replaced the trigger: %s", role, def)
	}
	if !strings.Contains(logged.String(), "chain trigger predates") {
		t.Errorf("no warning for the old trigger; logged %q", logged.String())
	}
	recs, err := w.Append(ctx, storetest.Event("c", "e", "1"))
	if err == nil {
		err = w.Sync(ctx, recs[0].Sequence)
	}
	if err != nil {
		t.Fatalf("append as %s over the old trigger: %v", role, err)
	}
	w.Close()

	s := open(t, dsn)
	defer s.Close()
	if def := chainTriggerDef(t, s); !strings.Contains(def, "WHEN ((new.prev_seq <> 0))") {
		t.Fatalf("the owner's Open left the chain trigger as %s", def)
	}
	for _, c := range []struct {
		prev, last uint64
		constraint string
	}{
		{recs[0].Sequence + 1, recs[0].Sequence + 5, "evidence_blocks_chain"},
		{0, recs[0].Sequence + 5, "evidence_blocks_no_fork"},
	} {
		_, err := s.pool.Exec(ctx, `INSERT INTO evidence_blocks VALUES ('c', $1, $2, '\x01')`, int64(c.prev), int64(c.last))
		if err == nil || !strings.Contains(err.Error(), c.constraint) {
			t.Errorf("a block (%d, %d]: %v, want the %s refusal", c.prev, c.last, err, c.constraint)
		}
	}
	if got, err := s.Replay(ctx, evidence.Query{CorrelationID: "c"}); err != nil || len(got) != 1 {
		t.Fatalf("replay: %d records, %v", len(got), err)
	}
}
