package docstest

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// entry is one decision of DECISIONS.md: a top-level bullet ("- …") or a
// paragraph that opens with a bold heading ("**…**"), with its section.
type entry struct {
	section string
	line    int // 1-based line of its first line
	text    string
}

// heading is what a failure calls the entry: its bold heading, else its
// first words.
func (e entry) heading() string {
	if m := boldRE.FindStringSubmatch(e.text); m != nil {
		return m[1]
	}
	if r := []rune(e.text); len(r) > 70 {
		return string(r[:70]) + "…"
	}
	return e.text
}

var (
	boldRE = regexp.MustCompile(`\*\*(.+?)\*\*`)
	codeRE = regexp.MustCompile("`([^`]+)`")
	// testRE finds a Go test, fuzz target, benchmark or example in a code
	// span: `TestX`, `pkg.TestX`, `TestX/subtest`, `TestX/*`.
	testRE = regexp.MustCompile(`(?:^|[^\w])((?:Test|Fuzz|Benchmark|Example)(?:[A-Z0-9_]\w*)?)`)
	funcRE = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark|Example)\w*)\(`)
)

// parseEntries splits a DECISIONS.md text into its decisions. An entry
// runs from its first line to the next blank line, heading or entry.
func parseEntries(text string) []entry {
	var out []entry
	var cur *entry
	section := ""
	flush := func() {
		if cur != nil {
			out = append(out, *cur)
			cur = nil
		}
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "#"):
			flush()
			section = strings.TrimSpace(strings.TrimLeft(l, "#"))
		case strings.TrimSpace(l) == "":
			flush()
		case strings.HasPrefix(l, "- ") || strings.HasPrefix(l, "**"):
			flush()
			cur = &entry{section: section, line: n, text: strings.TrimSpace(strings.TrimPrefix(l, "- "))}
		case cur != nil:
			cur.text += " " + strings.TrimSpace(l)
		}
	}
	flush()
	return out
}

// pins are the tests an entry names: Go test functions and testscript or
// case files (*.txtar, possibly a glob).
type pins struct {
	funcs, files []string
}

func pinsOf(e entry) pins {
	var p pins
	for _, m := range codeRE.FindAllStringSubmatch(e.text, -1) {
		span := m[1]
		if strings.HasSuffix(span, ".txtar") {
			p.files = append(p.files, span)
			continue
		}
		for _, t := range testRE.FindAllStringSubmatch(span, -1) {
			p.funcs = append(p.funcs, t[1])
		}
	}
	return p
}

// repo is what the repository declares: its test functions and its txtar
// files (by path below the root).
type repo struct {
	root  string
	funcs map[string]bool
	files []string
}

func loadRepo(root string) (*repo, error) {
	r := &repo{root: root, funcs: map[string]bool{}}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		switch {
		case strings.HasSuffix(path, "_test.go"):
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range funcRE.FindAllSubmatch(src, -1) {
				r.funcs[string(m[1])] = true
			}
		case strings.HasSuffix(path, ".txtar"):
			r.files = append(r.files, filepath.ToSlash(rel))
		}
		return nil
	})
	return r, err
}

// hasFile reports whether a txtar file named name exists: a path below the
// root, a glob of such paths, or a bare file name anywhere.
func (r *repo) hasFile(name string) bool {
	for _, f := range r.files {
		if ok, _ := filepath.Match(name, f); ok || f == name || strings.HasSuffix(f, "/"+name) {
			return true
		}
	}
	return false
}

// knownUnpinned are decisions, by heading, that named no existing test when
// this check was added. The list may only shrink, and is empty now: every
// decision names its tests. The check fails for an entry listed here that
// now names its tests (remove it from the list) or no longer exists.
var knownUnpinned = map[string]string{}

// check returns one problem per entry that names no test and per test an
// entry names that does not exist, except for the entries of unpinned,
// for which it reports instead that they are pinned now, and for each
// heading of unpinned that no entry has.
func (r *repo) check(entries []entry, unpinned map[string]string) []string {
	var problems []string
	seen := map[string]bool{}
	for _, e := range entries {
		where := fmt.Sprintf("DECISIONS.md:%d (%s) %q", e.line, e.section, e.heading())
		p := pinsOf(e)
		if _, ok := unpinned[e.heading()]; ok {
			seen[e.heading()] = true
			if len(r.check([]entry{e}, nil)) == 0 {
				problems = append(problems, where+": names its tests now; remove it from knownUnpinned")
			}
			continue
		}
		if len(p.funcs) == 0 && len(p.files) == 0 {
			problems = append(problems, where+": names no test (write `TestXxx`, `FuzzXxx`, `BenchmarkXxx`, `ExampleXxx` or a `*.txtar` in backticks)")
		}
		for _, f := range p.funcs {
			if !r.funcs[f] {
				problems = append(problems, fmt.Sprintf("%s: names %s, which no *_test.go declares", where, f))
			}
		}
		for _, f := range p.files {
			if !r.hasFile(f) {
				problems = append(problems, fmt.Sprintf("%s: names %s, which does not exist", where, f))
			}
		}
	}
	for h := range unpinned {
		if !seen[h] {
			problems = append(problems, fmt.Sprintf("knownUnpinned lists %q, which no decision has as its heading any more; remove it", h))
		}
	}
	slices.Sort(problems[len(problems)-countMissing(unpinned, seen):])
	return problems
}

func countMissing(unpinned map[string]string, seen map[string]bool) int {
	n := 0
	for h := range unpinned {
		if !seen[h] {
			n++
		}
	}
	return n
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "docs", "DECISIONS.md")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no docs/DECISIONS.md above the test directory")
		}
		dir = parent
	}
}

// TestDecisionsNameTests: every decision in docs/DECISIONS.md names at
// least one test that pins it, and every test it names is declared in a
// *_test.go file of the repository (any module) or is a txtar file of it.
func TestDecisionsNameTests(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(root, "docs", "DECISIONS.md"))
	if err != nil {
		t.Fatal(err)
	}
	entries := parseEntries(string(text))
	if len(entries) < 100 {
		t.Fatalf("found only %d decisions in DECISIONS.md: the parser no longer matches its layout", len(entries))
	}
	r, err := loadRepo(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.check(entries, knownUnpinned) {
		t.Error(p)
	}
}

// TestDecisionsCheckFindsProblems: the check reports a decision without a
// test and a named test that does not exist, and accepts qualified names,
// subtests, continuation lines and txtar globs.
func TestDecisionsCheckFindsProblems(t *testing.T) {
	doc := "# Decisions\n\nIntro names nothing.\n\n## Topic\n\n" +
		"- **Pinned.** Held by `pkg.TestReal/sub_case` and\n  `FuzzReal`.\n" +
		"- **Unpinned.** Says nothing testable.\n" +
		"- **Stale.** Pinned by `TestGone`.\n\n" +
		"**Scripted.** Pinned by `cases/*.txtar`.\n\n" +
		"**Script gone.** Pinned by `gone.txtar`.\n"
	entries := parseEntries(doc)
	if len(entries) != 5 {
		t.Fatalf("parsed %d entries, want 5: %+v", len(entries), entries)
	}
	if e := entries[0]; e.section != "Topic" || e.heading() != "Pinned." || !strings.Contains(e.text, "`FuzzReal`") {
		t.Fatalf("first entry %+v", e)
	}
	r := &repo{funcs: map[string]bool{"TestReal": true, "FuzzReal": true}, files: []string{"x/cases/a.txtar"}}
	r.files = append(r.files, "cases/b.txtar")
	got := r.check(entries, nil)
	want := []string{
		`DECISIONS.md:9 (Topic) "Unpinned.": names no test`,
		`DECISIONS.md:10 (Topic) "Stale.": names TestGone, which no *_test.go declares`,
		`DECISIONS.md:14 (Topic) "Script gone.": names gone.txtar, which does not exist`,
	}
	// Known debt is tolerated, but only while it is debt.
	if got := r.check(entries, map[string]string{"Unpinned.": "", "Stale.": "", "Script gone.": ""}); len(got) != 0 {
		t.Errorf("known unpinned entries reported: %q", got)
	}
	got2 := r.check(entries, map[string]string{"Pinned.": "", "Vanished.": ""})
	if len(got2) != 5 || !strings.HasSuffix(got2[0], `"Pinned.": names its tests now; remove it from knownUnpinned`) ||
		!strings.Contains(got2[4], `knownUnpinned lists "Vanished."`) {
		t.Errorf("stale knownUnpinned entries not reported: %q", got2)
	}
	if len(got) != len(want) {
		t.Fatalf("problems:\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d = %q, want prefix %q", i, got[i], want[i])
		}
	}
}
