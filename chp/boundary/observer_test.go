package boundary

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/capmesh/capmesh/chp"
)

type boundaryRecorder struct {
	mu       sync.Mutex
	outcomes map[string]int // "outcome code"
	commits  []int
}

func (r *boundaryRecorder) OnInvocation(o chp.Outcome, code string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes[string(o)+" "+code]++
}

func (r *boundaryRecorder) OnEvidenceCommit(events int, _ time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.commits = append(r.commits, events)
	}
}

// TestObserverSeesOutcomesAndCommits: every recorded invocation is
// reported with its outcome and denial code, and its final evidence commit
// with the events it appended.
func TestObserverSeesOutcomesAndCommits(t *testing.T) {
	rec := &boundaryRecorder{outcomes: map[string]int{}}
	b, err := New(Config{HostID: "test-host", Policy: FixturePolicy(), Safety: FixtureSafety(), Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := RegisterFixtures(b); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"conformance.echo", "conformance.risky", "conformance.fail", "no.such"} {
		if _, err := b.Invoke(context.Background(), &chp.InvocationEnvelope{CapabilityID: c, Payload: []byte(`{"value":1}`)}); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := map[string]int{"success ": 1, "denied " + chp.CodePolicyBlocked: 1, "failure ": 1, "denied " + chp.CodeCapabilityNotFound: 1}
	for k, n := range want {
		if rec.outcomes[k] != n {
			t.Errorf("%q: %d, want %d (all %v)", k, rec.outcomes[k], n, rec.outcomes)
		}
	}
	if len(rec.commits) != 4 {
		t.Fatalf("commits %v, want 4", rec.commits)
	}
	for _, n := range rec.commits {
		if n < 1 {
			t.Errorf("a commit of %d events", n)
		}
	}
}
