package conformance_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/conformance"
)

// TestStatusVocabulary: a host without a domain symlink (a SHOULD) gets
// warn for it, never fail; requirements that do not apply to it are skip;
// and no check has a status outside pass / fail / warn / unknown / skip.
func TestStatusVocabulary(t *testing.T) {
	spec := loadSpec(t, "testdata/hosts/real-rhizocrypt.txtar")
	dir := biomeos(t)
	addr := serve(t, dir, spec) // no symlink points at it
	rep := conformance.Audit(context.Background(), addr, &conformance.Options{ProbeTimeout: 10 * time.Second})
	if !rep.Reachable {
		t.Fatalf("unreachable: %s", rep.Error)
	}
	byID := map[string]conformance.Check{}
	for _, c := range rep.Checks {
		byID[c.ID] = c
		switch c.Status {
		case conformance.Pass, conformance.Fail, conformance.Warn, conformance.Unknown, conformance.Skip:
		default:
			t.Errorf("%s has status %q, outside the vocabulary", c.ID, c.Status)
		}
	}
	if c, ok := byID["IPC.domain_symlink"]; !ok || c.Status != conformance.Warn || c.Reason == "" {
		t.Errorf("IPC.domain_symlink without a symlink = %+v, want warn with a reason", c)
	}
	skips := 0
	for _, c := range rep.Checks {
		if c.Status == conformance.Skip {
			skips++
		}
	}
	if skips == 0 {
		var sb strings.Builder
		conformance.WriteReport(&sb, rep)
		t.Errorf("no check skipped for a host without a signed announcement or CHP:\n%s", sb.String())
	}
}
