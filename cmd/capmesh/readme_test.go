package main

import (
	"os"
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
