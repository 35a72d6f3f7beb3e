package sqlite

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/storetest"
)

func open(t *testing.T, dir string) evidence.Store {
	t.Helper()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) evidence.Store { return open(t, t.TempDir()) })
}

func TestDurable(t *testing.T) { storetest.RunDurable(t, open) }

// TestCrashDurability: every acknowledged record and result survives
// SIGKILL (storetest.Crash).
func TestCrashDurability(t *testing.T) {
	storetest.Crash(t, func(dir string) (evidence.Store, error) { return Open(dir, nil) })
}

// TestAppendOnlyAndPrivate: the file refuses updates and deletes even to
// someone holding it, a second process cannot open the store, and the files
// are private.
func TestAppendOnlyAndPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ev")
	ctx := context.Background()
	s := open(t, dir)
	recs, err := s.Append(ctx, storetest.Event("c", "e", "1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(ctx, recs[0].Sequence); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, nil); err == nil {
		t.Fatal("a second Open of a live store succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, FileName): 0o600} {
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", path, st.Mode().Perm(), err, want)
		}
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{`UPDATE events SET data = x'00'`, `DELETE FROM events`} {
		if _, err := db.Exec(q); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: %v, want the append-only refusal", q, err)
		}
	}
}
