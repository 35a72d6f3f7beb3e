package sqlite_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/sqlite"
	"github.com/capmesh/capmesh/registry/storetest"
)

func TestSQLiteStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T, dir string) registry.Store {
		s, err := sqlite.Open(filepath.Join(dir, "registry.db"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, true)
}

func TestFileIsPrivate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "registry.db")
	s, err := sqlite.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %#o, want 0600", fi.Mode().Perm())
	}
}

func TestRefusesWorldReadableFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "registry.db")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := sqlite.Open(p); err == nil {
		s.Close()
		t.Fatal("opened a 0644 database")
	}
}
