package xdg

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestStateDirDefaultsToXDGStateHome(t *testing.T) {
	base := t.TempDir()
	t.Setenv("XDG_STATE_HOME", base)
	dir, err := StateDir("")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(base, "capmesh"); dir != want {
		t.Fatalf("StateDir = %q, want %q", dir, want)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %#o, want 0700", fi.Mode().Perm())
	}
}

func TestStateDirOverride(t *testing.T) {
	want := filepath.Join(t.TempDir(), "x", "y")
	dir, err := StateDir(want)
	if err != nil || dir != want {
		t.Fatalf("StateDir(%q) = %q, %v", want, dir, err)
	}
	sub, err := SubDir(want, "keys")
	if err != nil || sub != filepath.Join(want, "keys") {
		t.Fatalf("SubDir = %q, %v", sub, err)
	}
}

func TestEnsurePrivateDirRefusesWritableByOthers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	err := EnsurePrivateDir(dir)
	if err == nil || !strings.Contains(err.Error(), "chmod 700") {
		t.Fatalf("EnsurePrivateDir on a 0777 dir = %v, want an error naming the fix", err)
	}
}

// TestEnsurePrivateDirRefusesForeignOwner: an existing directory that
// belongs to another user is refused (not adopted), with ErrNotOwner.
// Changing a directory's owner needs root, so the test runs only as root.
func TestEnsurePrivateDirRefusesForeignOwner(t *testing.T) {
	if os.Geteuid() != 0 || runtime.GOOS == "windows" {
		t.Skip("chown to another user needs root")
	}
	dir := filepath.Join(t.TempDir(), "state")
	if err := EnsurePrivateDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	err := EnsurePrivateDir(dir)
	if !errors.Is(err, ErrNotOwner) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("directory owned by uid 65534: %v, want ErrNotOwner naming it", err)
	}
}
