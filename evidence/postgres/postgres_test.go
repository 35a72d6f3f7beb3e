package postgres

import (
	"context"
	"os"
	"testing"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/postgres/pgtest"
	"github.com/capmesh/capmesh/evidence/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func open(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) evidence.Store { return open(t, pgtest.FreshDSN(t)) })
}

// TestDurable runs the durable suite; a directory names a schema.
func TestDurable(t *testing.T) {
	storetest.RunDurable(t, func(t *testing.T, dir string) evidence.Store { return open(t, pgtest.DSN(t, dir)) })
}

// TestCrashDurability: every acknowledged record and result survives
// SIGKILL of the writing process (storetest.Crash). The server runs before
// the first child does, even when this test runs alone.
func TestCrashDurability(t *testing.T) {
	pgtest.Require(t)
	storetest.Crash(t, func(dir string) (evidence.Store, error) {
		dsn, err := pgtest.SchemaDSN(context.Background(), dir)
		if err != nil {
			return nil, err
		}
		return Open(context.Background(), dsn, nil)
	})
}
