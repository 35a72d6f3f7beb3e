// Package xdg locates capmesh's per-user state directory following the XDG
// Base Directory specification: $XDG_STATE_HOME/capmesh, or
// ~/.local/state/capmesh when XDG_STATE_HOME is unset. Keys, the registry
// database and the evidence store live below it unless --data-dir overrides
// the location.
package xdg

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// StateDir returns the capmesh state directory, creating it with mode 0700 if
// it does not exist. A non-empty override (from --data-dir or
// CAPMESH_DATA_DIR) is used as is.
func StateDir(override string) (string, error) {
	dir := override
	if dir == "" {
		base := os.Getenv("XDG_STATE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("state directory: neither XDG_STATE_HOME nor a home directory is set: %w", err)
			}
			base = filepath.Join(home, ".local", "state")
		}
		dir = filepath.Join(base, "capmesh")
	}
	if err := EnsurePrivateDir(dir); err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	return dir, nil
}

// SubDir returns StateDir(override)/name, created with mode 0700.
func SubDir(override, name string) (string, error) {
	root, err := StateDir(override)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, name)
	if err := EnsurePrivateDir(dir); err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	return dir, nil
}

// EnsurePrivateDir creates dir (and its parents) with mode 0700 when missing.
// An existing directory must belong to the current user and must not be
// writable by group or others; it is not silently chmod'ed, because a
// directory someone else can write is a directory someone else may already
// have planted files in.
func EnsurePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s has mode %#o: group or others can write it; run chmod 700 %s", dir, fi.Mode().Perm(), dir)
	}
	if err := CheckOwner(fi); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	return nil
}

// ErrNotOwner is what CheckOwner's errors wrap: a file or directory
// belongs to another user.
var ErrNotOwner = errors.New("owned by another user")
