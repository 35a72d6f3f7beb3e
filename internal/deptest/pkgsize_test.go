package deptest

import (
	"bytes"
	"io/fs"
	"os"
	pathpkg "path"
	"path/filepath"
	"strings"
	"testing"
)

// maxPackageLines is the most non-test lines a package of the module may
// have, counted as issue 16 counts: `cat $(ls DIR/*.go | grep -v _test.go)
// | wc -l`.
const maxPackageLines = 2500

// largePackages are the packages allowed over maxPackageLines, by directory
// below the module root, each with its size when it was listed: a ceiling
// that may only come down. TestPackageSize fails when a listed package
// grows past its ceiling, and when it drops to maxPackageLines or under, so
// that its entry is removed. Each is being split by a change in flight.
var largePackages = map[string]int{}

// TestPackageSize counts the non-test lines of every package of the module
// (nested modules, testdata and hidden directories aside) and fails for any
// over maxPackageLines that largePackages does not list, for a listed one
// over its ceiling, and for a listed one no longer over the limit.
func TestPackageSize(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	sizes, err := packageSizes(root)
	if err != nil {
		t.Fatal(err)
	}
	for dir, n := range sizes {
		ceiling, listed := largePackages[dir]
		switch {
		case n > maxPackageLines && !listed:
			t.Errorf("%s has %d non-test lines, over %d: split it into packages along its data flow", dir, n, maxPackageLines)
		case listed && n > ceiling:
			t.Errorf("%s has %d non-test lines, more than its ceiling of %d in largePackages: the list may only shrink; move code out instead", dir, n, ceiling)
		}
	}
	for dir := range largePackages {
		if sizes[dir] <= maxPackageLines {
			t.Errorf("%s is listed in largePackages but has %d non-test lines, not over %d (or is gone): remove its entry", dir, sizes[dir], maxPackageLines)
		}
	}
}

// packageSizes returns the number of lines of the non-test .go files of
// every directory under root, by slash-separated path below root ("." for
// root itself).
func packageSizes(root string) (map[string]int, error) {
	sizes := map[string]int{}
	err := walkSources(root, func(path, rel string) error {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sizes[pathpkg.Dir(rel)] += bytes.Count(data, []byte("\n"))
		return nil
	})
	return sizes, err
}

// walkSources calls fn for every non-test .go file of the module at root,
// with its path relative to root in slash form; nested modules, testdata
// and hidden or underscore directories are skipped, as the go command
// skips them.
func walkSources(root string, fn func(path, rel string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == root {
				return nil
			}
			name := d.Name()
			if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		return fn(path, filepath.ToSlash(rel))
	})
}
