package wire

import (
	"bytes"
	"fmt"
	"go/ast"
	goparser "go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChecklistTable: the checklist's ids are unique and name their level,
// every level 1-3 has requirements, and Level reports each requirement
// once, in table order, with the table's wording.
func TestChecklistTable(t *testing.T) {
	seen := map[string]bool{}
	perLevel := map[int]int{}
	for _, q := range checklist {
		if seen[q.id] {
			t.Errorf("duplicate id %s", q.id)
		}
		seen[q.id] = true
		perLevel[q.level]++
		if !strings.HasPrefix(q.id, fmt.Sprintf("L%d.", q.level)) {
			t.Errorf("id %s does not name its level %d", q.id, q.level)
		}
		if q.requirement == "" || q.how == "" || q.check == nil {
			t.Errorf("%s: requirement, how and check are all needed", q.id)
		}
	}
	for level := 1; level <= 3; level++ {
		if perLevel[level] == 0 {
			t.Errorf("level %d has no requirements", level)
		}
	}
	if len(perLevel) != 3 {
		t.Errorf("levels %v, want exactly 1, 2 and 3", perLevel)
	}
	for _, r := range []Report{Level(nil, nil), Level(&Capabilities{}, &Probe{MethodsChecked: true})} {
		if len(r.Checks) != len(checklist) {
			t.Fatalf("%d checks, want %d", len(r.Checks), len(checklist))
		}
		for i, c := range r.Checks {
			q := checklist[i]
			if c.ID != q.id || c.Level != q.level || c.Requirement != q.requirement {
				t.Errorf("check %d is %s L%d %q, want %s L%d %q", i, c.ID, c.Level, c.Requirement, q.id, q.level, q.requirement)
			}
		}
	}
}

// auditDoc is the document that lists the checklist.
const auditDoc = "../docs/audit.md"

// checklistMarkdown renders the checklist as the table docs/audit.md holds.
func checklistMarkdown() string {
	var b strings.Builder
	b.WriteString("| id | level | requirement | how it is checked |\n|---|---|---|---|\n")
	for _, q := range checklist {
		fmt.Fprintf(&b, "| %s | %d | %s | %s |\n", q.id, q.level, strings.ReplaceAll(q.requirement, "|", `\|`), strings.ReplaceAll(q.how, "|", `\|`))
	}
	return b.String()
}

// TestAuditDocChecklist fails when the checklist in docs/audit.md differs
// from the table in level.go; -update rewrites it.
func TestAuditDocChecklist(t *testing.T) {
	const begin, end = "<!-- BEGIN wire checklist -->\n", "<!-- END wire checklist -->"
	doc, err := os.ReadFile(auditDoc)
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(doc, []byte(begin)), bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		t.Fatalf("%s has no %q … %q section", auditDoc, strings.TrimSpace(begin), end)
	}
	want := checklistMarkdown()
	got := string(doc[i+len(begin) : j])
	if got == want {
		return
	}
	if !*update {
		t.Fatalf("%s is out of date with the checklist in level.go; run go test ./wire -run TestAuditDocChecklist -update\ngot:\n%s\nwant:\n%s", auditDoc, got, want)
	}
	out := append(append(append([]byte{}, doc[:i+len(begin)]...), want...), doc[j:]...)
	if err := os.WriteFile(auditDoc, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFunctionsShort: no function of the package (tests aside) is over
// 100 lines; long checklists are tables.
func TestFunctionsShort(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := goparser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > 100 {
					t.Errorf("%s: %s is %d lines, over 100", f, fd.Name.Name, n)
				}
			}
		}
	}
}
