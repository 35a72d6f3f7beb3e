package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// tourCommand is one command line of the README's tour and the exit status
// the README shows for it (0 when it shows none).
type tourCommand struct {
	line string
	exit int
}

var (
	readmeExitLine    = regexp.MustCompile(`^exit (\d+)$`)
	readmeExitComment = regexp.MustCompile(`\bexit (\d+)\b`)
	scriptExitcode    = regexp.MustCompile(`^exitcode (\d+) (.*)$`)
	scriptBackground  = regexp.MustCompile(`\s*&\w+&$`)
	spaces            = regexp.MustCompile(`\s+`)
)

// readmeTour extracts the commands of the README's "A tour" section: the
// indented lines that start with "$ capmesh", "capmesh" or "go run", with
// the shell decorations removed (a trailing comment, `; echo "exit $?"`,
// an output redirection). A command's exit status is the "exit N" line its
// `echo "exit $?"` prints, or an "exit N" in its comment.
func readmeTour(t *testing.T, readme string) []tourCommand {
	t.Helper()
	start := strings.Index(readme, "\n## A tour\n")
	end := strings.Index(readme, "\n## A host in ten lines\n")
	if start < 0 || end < start {
		t.Fatal(`README.md: no "## A tour" section before "## A host in ten lines"`)
	}
	var out []tourCommand
	for _, l := range strings.Split(readme[start:end], "\n") {
		if !strings.HasPrefix(l, "    ") {
			continue
		}
		l = strings.TrimSpace(l)
		if m := readmeExitLine.FindStringSubmatch(l); m != nil && len(out) > 0 {
			out[len(out)-1].exit, _ = strconv.Atoi(m[1])
			continue
		}
		l = strings.TrimPrefix(l, "$ ")
		if !strings.HasPrefix(l, "capmesh ") && !strings.HasPrefix(l, "go run ") {
			continue
		}
		c := tourCommand{}
		if i := strings.Index(l, "  #"); i >= 0 {
			if m := readmeExitComment.FindStringSubmatch(l[i:]); m != nil {
				c.exit, _ = strconv.Atoi(m[1])
			}
			l = l[:i]
		}
		l = strings.TrimSuffix(strings.TrimSpace(l), `; echo "exit $?"`)
		if i := strings.Index(l, " > "); i >= 0 {
			l = l[:i]
		}
		c.line = spaces.ReplaceAllString(strings.TrimSpace(l), " ")
		out = append(out, c)
	}
	return out
}

// scriptTour reads the commands readme_tour.txtar runs, with their expected
// exit status, and the ones it declares it does not run ("# not run: CMD
// (reason)"). kvhost stands for `go run ./examples/kvhost`; a background
// command's expected status is not checked (-1).
func scriptTour(t *testing.T, script string) (map[string]int, map[string]bool) {
	t.Helper()
	run, notRun := map[string]int{}, map[string]bool{}
	for _, l := range strings.Split(script, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "-- ") {
			break
		}
		if rest, ok := strings.CutPrefix(l, "# not run: "); ok {
			if i := strings.Index(rest, " ("); i >= 0 {
				rest = rest[:i]
			}
			notRun[spaces.ReplaceAllString(rest, " ")] = true
			continue
		}
		exit := 0
		switch {
		case strings.HasPrefix(l, "exec "):
			l = strings.TrimPrefix(l, "exec ")
		case strings.HasPrefix(l, "! exec "):
			l, exit = strings.TrimPrefix(l, "! exec "), -1
		default:
			m := scriptExitcode.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			exit, _ = strconv.Atoi(m[1])
			l = m[2]
		}
		if scriptBackground.MatchString(l) {
			l, exit = scriptBackground.ReplaceAllString(l, ""), -1
		}
		if l == "kvhost" {
			l = "go run ./examples/kvhost"
		}
		run[spaces.ReplaceAllString(l, " ")] = exit
	}
	return run, notRun
}

// TestReadmeTourInSync keeps the README's tour and readme_tour.txtar, which
// runs it, from drifting apart: every command of the tour must be run by
// the script (or be declared "not run" there, with the reason) and exit
// with the status the README shows.
func TestReadmeTourInSync(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("testdata/script/readme_tour.txtar")
	if err != nil {
		t.Fatal(err)
	}
	tour := readmeTour(t, string(readme))
	if len(tour) < 15 {
		t.Fatalf("only %d commands found in the README's tour: %v", len(tour), tour)
	}
	run, notRun := scriptTour(t, string(script))
	for _, c := range tour {
		got, ok := run[c.line]
		switch {
		case notRun[c.line]:
		case !ok:
			t.Errorf("README tour command not run by readme_tour.txtar: %s", c.line)
		case got >= 0 && got != c.exit:
			t.Errorf("%s: README shows exit %d, readme_tour.txtar expects %d", c.line, c.exit, got)
		}
	}
}

// TestReadmeInstallAndEnvironment pins what the README promises a first
// hour: the install line that works from a checkout (static, onto PATH;
// the module is not published, so no @latest), the two commands exactly,
// and an Environment section naming every variable this command reads
// itself (os.Getenv or envOr in its sources).
func TestReadmeInstallAndEnvironment(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, line := range []string{
		"\n    CGO_ENABLED=0 go install ./cmd/capmesh\n",
		"\n    go run ./cmd/capmesh server\n",
		"\n    go test -race ./...\n",
		"$(go env GOPATH)/bin",
	} {
		if !strings.Contains(readme, line) {
			t.Errorf("README.md lacks %q", strings.TrimSpace(line))
		}
	}
	if strings.Contains(readme, "@latest") {
		t.Error("README.md installs with @latest; the module is not published")
	}
	start := strings.Index(readme, "\n## Environment\n")
	if start < 0 {
		t.Fatal("README.md has no Environment section")
	}
	env := readme[start:]
	if end := strings.Index(env[1:], "\n## "); end >= 0 {
		env = env[:end+1]
	}
	srcs, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	family, err := filepath.Glob("internal/*/*.go") // the command families
	if err != nil {
		t.Fatal(err)
	}
	srcs = append(srcs, family...)
	read := regexp.MustCompile(`(?:Getenv|envOr)\("([A-Z0-9_]+)"`)
	found := 0
	for _, f := range srcs {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range read.FindAllStringSubmatch(string(src), -1) {
			found++
			if !strings.Contains(env, "`"+m[1]+"`") {
				t.Errorf("%s reads %s, which README.md's Environment section does not list", f, m[1])
			}
		}
	}
	if found < 4 {
		t.Errorf("only %d variable reads found in the sources", found)
	}
}
