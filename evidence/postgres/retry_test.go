package postgres

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/capmesh/capmesh/evidence"
)

// TestStoredRetryFailsNoSync: a retried result is written by its own
// statement (retrySQL); when that statement stores it and the commit's
// main statement fails on a refused block, the main statement's failure
// held no result: the Sync of a record committed before, whose window
// covers the failed commit, returns nil, as every result put before it
// is stored and its record is.
func TestStoredRetryFailsNoSync(t *testing.T) {
	ctx := context.Background()
	s1, _, _ := committedB(t)
	e, err := s1.Append(ctx, hinted("E", "e"))
	if err != nil || s1.Sync(ctx, e[0].Sequence) != nil {
		t.Fatalf("append: %v", err)
	}
	if err := s1.PutResult(ctx, evidence.Result{InvocationID: "r", At: time.Now(), Data: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	wrong, err := s1.Append(ctx, hinted("B", "x")) // collides with s2's B: the statement fails
	if err != nil {
		t.Fatal(err)
	}
	if err := s1.Sync(ctx, wrong[0].Sequence); err == nil {
		t.Fatal("the wrong hint's commit succeeded")
	}
	// The result is queued again; the next commit's main statement fails
	// on a second wrong hint, its retry statement stores the result.
	if _, err := s1.Append(ctx, hinted("B", "y")); err != nil {
		t.Fatal(err)
	}
	if err := s1.Sync(ctx, e[0].Sequence); err != nil {
		t.Fatalf("Sync of a committed record, every result before it stored: %v", err)
	}
	if got := resultIDs(t, s1); !slices.Equal(got, []string{"r"}) {
		t.Fatalf("Results = %q, want the retried result", got)
	}
}
