package conformance

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated sections of docs/audit.md")

// TestCHPChecklistTable: the CHP checklist holds §11's nine requirements,
// CHP.1 to CHP.9 in order, then capmesh's own extra checks; every row has
// its wording, source, how and check.
func TestCHPChecklistTable(t *testing.T) {
	seen := map[string]bool{}
	nine := 0
	for i, q := range chpChecklist {
		if seen[q.id] {
			t.Errorf("duplicate id %s", q.id)
		}
		seen[q.id] = true
		if q.requirement == "" || q.source == "" || q.how == "" || q.check == nil {
			t.Errorf("%s: requirement, source, how and check are all needed", q.id)
		}
		if q.extra {
			continue
		}
		nine++
		if want := fmt.Sprintf("CHP.%d", i+1); q.id != want {
			t.Errorf("row %d is %s, want %s (the nine of §11 come first, in order)", i, q.id, want)
		}
	}
	if nine != 9 {
		t.Errorf("%d requirements of §11, want 9", nine)
	}
}

// auditDoc is the document that lists the checklists.
const auditDoc = "../docs/audit.md"

// chpChecklistMarkdown renders the CHP checklist as docs/audit.md holds it.
func chpChecklistMarkdown() string {
	var b strings.Builder
	b.WriteString("| id | requirement | source | how it is checked |\n|---|---|---|---|\n")
	esc := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	for _, q := range chpChecklist {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", q.id, esc(q.requirement), esc(q.source), esc(q.how))
	}
	return b.String()
}

// TestAuditDocCHPChecklist fails when the CHP checklist in docs/audit.md
// differs from the table in chp.go; -update rewrites it.
func TestAuditDocCHPChecklist(t *testing.T) {
	const begin, end = "<!-- BEGIN chp checklist -->\n", "<!-- END chp checklist -->"
	doc, err := os.ReadFile(auditDoc)
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(doc, []byte(begin)), bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		t.Fatalf("%s has no %q … %q section", auditDoc, strings.TrimSpace(begin), end)
	}
	want := chpChecklistMarkdown()
	got := string(doc[i+len(begin) : j])
	if got == want {
		return
	}
	if !*update {
		t.Fatalf("%s is out of date with the CHP checklist in chp.go; run go test ./conformance -run TestAuditDocCHPChecklist -update\ngot:\n%s\nwant:\n%s", auditDoc, got, want)
	}
	out := append(append(append([]byte{}, doc[:i+len(begin)]...), want...), doc[j:]...)
	if err := os.WriteFile(auditDoc, out, 0o644); err != nil {
		t.Fatal(err)
	}
}
