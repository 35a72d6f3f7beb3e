package postgres

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capmesh/capmesh/evidence"
)

// TestResultKeptUntilItsPutterSyncs: a putter calls Sync after PutResult
// returns (the gateway's PutResult then Sync(0)), and in between any
// number of other callers' commits may take its result and fail: during
// an outage that fails every statement at once, maxResultTries of them
// take a few milliseconds. Here four other callers' Syncs fail it, the
// database then takes results again, and the putter's Sync must store
// the result or fail, never return nil without it: a result is given up
// only once resultPatience has passed since its first failed commit too.
func TestResultKeptUntilItsPutterSyncs(t *testing.T) {
	ctx := context.Background()
	s, grant := refusingResults(t)
	defer s.Close()
	s.patience = time.Hour // far beyond the test, however loaded the machine
	if err := s.PutResult(ctx, evidence.Result{InvocationID: "mine", At: time.Now(), Data: []byte(`{"ok":1}`)}); err != nil {
		t.Fatal(err)
	}
	for i := range maxResultTries { // other callers, each leading a commit that fails
		if err := s.Sync(ctx, 0); err == nil {
			t.Fatalf("another caller's Sync %d = nil while the database refuses results", i+1)
		}
	}
	grant()
	serr := s.Sync(ctx, 0) // the putter's, late
	stored := slices.Contains(resultIDs(t, s), "mine")
	if serr == nil && !stored {
		t.Fatal("the putter's Sync returned nil, but its result is not stored")
	}
	if serr != nil || !stored {
		t.Fatalf("the putter's Sync = %v, result stored %v: want it kept, retried and stored", serr, stored)
	}
}

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

// TestGivenUpLoggedOnce: an outage gives up every result put a second
// before it, thousands a second on a busy host: the store logs one line
// per failed commit however many it gave up (their number and the first
// ids), not one per result; and a failed commit that held no block logs
// no sequence range.
func TestGivenUpLoggedOnce(t *testing.T) {
	ctx := context.Background()
	s, _ := refusingResults(t)
	defer s.Close()
	s.patience = 0
	var logged lockedBuffer
	s.log = slog.New(slog.NewTextHandler(&logged, nil))
	const n = 50
	for i := range n {
		if err := s.PutResult(ctx, evidence.Result{InvocationID: fmt.Sprint("lost-", i), At: time.Now(), Data: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range maxResultTries {
		if err := s.Sync(ctx, 0); err == nil {
			t.Fatalf("Sync %d = nil while the database refuses results", i+1)
		}
	}
	lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
	if want := maxResultTries + 1; len(lines) != want { // one per failed commit, one for the results given up
		t.Errorf("%d log lines for %d failed commits of %d results, want %d:\n%s", len(lines), maxResultTries, n, want, logged.String())
	}
	given := 0
	for _, l := range lines {
		if strings.Contains(l, "given up") {
			given++
			if !strings.Contains(l, fmt.Sprint("results=", n)) || !strings.Contains(l, "lost-0") {
				t.Errorf("given-up line without the count or the first id: %s", l)
			}
		}
		if strings.Contains(l, fmt.Sprint(^uint64(0))) {
			t.Errorf("a commit without blocks logs a sequence range: %s", l)
		}
	}
	if given != 1 {
		t.Errorf("%d lines say results were given up, want 1:\n%s", given, logged.String())
	}
}

// lockedBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
