package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// root is the module root, seen from this package's directory.
const root = "../../.."

// TestGeneratedUpToDate fails while catalog_gen.go or docs/errors.md differ
// from what errors.json generates: run go generate ./internal/errcatalog.
func TestGeneratedUpToDate(t *testing.T) {
	data, err := os.ReadFile("../errors.json")
	if err != nil {
		t.Fatal(err)
	}
	src, md, err := render(data)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string][]byte{"../catalog_gen.go": src, root + "/docs/errors.md": md} {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./internal/errcatalog", path)
		}
	}
}

// TestLoadRefusesAmbiguity checks that a catalog giving a code two
// meanings (or two codes one name or word), or with an out-of-range code,
// a bad status or retry value, is refused.
func TestLoadRefusesAmbiguity(t *testing.T) {
	ok := `{"code":-32001,"name":"A","title":"A","word":"a","meaning":"m","http_status":401,"retry":"no","owners":["x"]}`
	cases := map[string]string{
		"code twice": `[` + ok + `,` + strings.NewReplacer(`"A"`, `"B"`, `"a"`, `"b"`).Replace(ok) + `]`,
		"name twice": `[` + ok + `,` + strings.NewReplacer(`-32001`, `-32002`, `"a"`, `"b"`).Replace(ok) + `]`,
		"word twice": `[` + ok + `,` + strings.NewReplacer(`-32001`, `-32002`, `"A"`, `"B"`).Replace(ok) + `]`,
		"range":      `[` + strings.Replace(ok, "-32001", "-31999", 1) + `]`,
		"status":     `[` + strings.Replace(ok, "401", "299", 1) + `]`,
		"retry":      `[` + strings.Replace(ok, `"no"`, `"maybe"`, 1) + `]`,
		"owners":     `[` + strings.Replace(ok, `["x"]`, `[]`, 1) + `]`,
		"unknown":    `[` + strings.Replace(ok, `"code"`, `"extra":1,"code"`, 1) + `]`,
	}
	if _, err := load([]byte(`[` + ok + `]`)); err != nil {
		t.Fatalf("a valid catalog refused: %v", err)
	}
	for name, c := range cases {
		if _, err := load([]byte(c)); err == nil {
			t.Errorf("%s: accepted %s", name, c)
		}
	}
}

// TestEveryCodeInCatalog walks the module's Go files: every JSON-RPC error
// code literal (-32768..-32000) must be a catalog code (or a bound of the
// reserved ranges), no package may declare a code constant with a literal
// of its own, and every owner named in the catalog must refer to the
// code's constant.
func TestEveryCodeInCatalog(t *testing.T) {
	data, err := os.ReadFile("../errors.json")
	if err != nil {
		t.Fatal(err)
	}
	es, err := load(data)
	if err != nil {
		t.Fatal(err)
	}
	known := map[int]bool{-32768: true, -32099: true}
	for _, e := range es {
		known[e.Code] = true
	}
	literal := regexp.MustCompile(`(?:^|[^0-9.eE])(-3[12][0-9]{3})\b`)
	decl := regexp.MustCompile(`(?m)^\s*(?:const\s+)?\w+\s+(?:jsonrpc\.)?Code\s*=\s*-?[0-9]`)
	sources := map[string]string{} // package dir -> its non-test Go source
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || (strings.HasPrefix(n, ".") && path != root) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, m := range literal.FindAllSubmatch(b, -1) {
			if c, _ := strconv.Atoi(string(m[1])); c >= -32768 && c <= -32000 && !known[c] {
				t.Errorf("%s: code %d is not in internal/errcatalog/errors.json", rel, c)
			}
		}
		if strings.HasSuffix(path, "_test.go") {
			return nil
		}
		if !strings.HasPrefix(rel, "internal/errcatalog") && decl.Match(b) {
			t.Errorf("%s: declares a code with a literal: use the errcatalog constant", rel)
		}
		sources[filepath.ToSlash(filepath.Dir(rel))] += string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		for _, o := range e.Owners {
			if !strings.Contains(sources[o], "errcatalog."+e.Name) {
				t.Errorf("%s is named as sending %d but does not refer to errcatalog.%s", o, e.Code, e.Name)
			}
		}
	}
}

// FuzzRender feeds arbitrary catalogs to the generator: it never panics,
// and whatever it accepts renders to Go that is well formed and a table
// with one row per code.
func FuzzRender(f *testing.F) {
	data, err := os.ReadFile("../errors.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`[{"code":-32001,"name":"A","title":"a|b","word":"a","meaning":"m\n*/ x","http_status":401,"retry":"no","owners":["x"]}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := load(data)
		if err != nil {
			return
		}
		src, md, err := render(data)
		if err != nil {
			t.Fatalf("accepted catalog does not render: %v", err)
		}
		if !bytes.Contains(src, []byte("package errcatalog")) {
			t.Fatalf("generated Go: %s", src)
		}
		if rows := bytes.Count(md, []byte("\n| -")); rows != len(es) {
			t.Fatalf("%d table rows for %d codes", rows, len(es))
		}
	})
}
