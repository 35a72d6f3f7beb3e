package postgres

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/postgres/pgtest"
	"github.com/capmesh/capmesh/evidence/storetest"
)

// TestLeastPrivilegeRole: a host whose role holds only the grants
// docs/operations.md lists opens an existing schema, appends, syncs,
// records results and replays — and the database refuses it any change to
// the evidence by permission as well as by trigger.
func TestLeastPrivilegeRole(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshDSN(t)
	owner := open(t, dsn) // the owner creates the schema
	owner.Close()
	wdsn, role := leastPrivilege(t, dsn)
	s, err := Open(ctx, wdsn, nil)
	if err != nil {
		t.Fatalf("open as %s: %v", role, err)
	}
	recs, err := s.Append(ctx, storetest.Event("c", "e", "1"), storetest.Event("c", "e", "2"))
	if err == nil {
		err = s.PutResult(ctx, evidence.Result{InvocationID: "i", At: time.Now(), Data: []byte("{}")})
	}
	if err == nil {
		err = s.Sync(ctx, recs[1].Sequence)
	}
	if err != nil {
		t.Fatalf("append as %s: %v", role, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, wdsn)
	defer s.Close()
	if got, err := s.Replay(ctx, evidence.Query{CorrelationID: "c"}); err != nil || len(got) != 2 {
		t.Fatalf("replay as %s: %d records, %v", role, len(got), err)
	}
	for _, q := range []string{`UPDATE evidence_blocks SET body = '\x00'`, `DELETE FROM evidence_blocks`, `TRUNCATE evidence_blocks`,
		`DROP TRIGGER evidence_blocks_no_change ON evidence_blocks`, `DELETE FROM evidence_result_log`,
		`UPDATE evidence_result_log SET body = '\x00'`} {
		if err := execOn(ctx, wdsn, q); err == nil || !strings.Contains(err.Error(), "permission denied") && !strings.Contains(err.Error(), "must be owner") {
			t.Errorf("%s as %s: %v, want a permission refusal", q, role, err)
		}
	}
}

// leastPrivilege creates a role holding only the grants docs/operations.md
// lists on the existing schema of dsn, dropped when t ends, and returns
// dsn logging in as it.
func leastPrivilege(t *testing.T, dsn string) (wdsn, role string) {
	t.Helper()
	ctx := context.Background()
	role = "evw_" + strings.ToLower(rand.Text()[:12])
	grants := []string{
		`CREATE ROLE ` + role + ` LOGIN`,
		`GRANT USAGE ON SCHEMA ` + schemaOf(t, dsn) + ` TO ` + role,
		`GRANT SELECT, INSERT ON evidence_blocks, evidence_result_log TO ` + role,
		`GRANT SELECT, UPDATE ON evidence_meta TO ` + role,
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = execOn(c, dsn, `DROP OWNED BY `+role)
		_ = execOn(c, dsn, `DROP ROLE `+role)
	})
	for _, g := range grants {
		if err := execOn(ctx, dsn, g); err != nil {
			t.Fatalf("%s: %v", g, err)
		}
	}
	return pgtest.Param(dsn, "user", role), role
}
