package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/postgres/pgtest"
	"github.com/capmesh/capmesh/evidence/storetest"
	"github.com/capmesh/capmesh/internal/logbuf"
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
	var logged logbuf.Buffer
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

// TestResultOutagesNeverLie: callers put lone results and Sync(0) (the
// gateway), or append, put a result that rides on their block and Sync
// their record (the boundary), some pausing between PutResult and Sync,
// while the database refuses results for short spells (a grant revoked
// and given back). The only failures are those refusals; every result
// put before a Sync that returned nil is stored, and so is every record
// whose Sync returned nil.
func TestResultOutagesNeverLie(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // only matters when stuck
	defer cancel()
	dsn := pgtest.FreshDSN(t)
	open(t, dsn).Close()
	wdsn, role := leastPrivilege(t, dsn)
	s, err := Open(ctx, wdsn, &Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// Beyond any scheduling stall of a loaded machine under -race, so that
	// only the requeueing is tested (with 0 the test finds lost results).
	s.patience = time.Minute
	corrs := []string{"A", "B", "C"}
	var (
		mu       sync.Mutex
		acked    = map[uint64]string{}
		ackedRes = map[string]bool{}
		nfail    int
	)
	refused := func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && pe.Code == "42501"
	}
	invoke := func(rng *rand.Rand, id string) (recs []evidence.Record, err error) {
		pause := func() {
			if rng.IntN(4) == 0 {
				time.Sleep(time.Duration(rng.IntN(10000)) * time.Microsecond)
			}
		}
		if rng.IntN(2) == 0 { // the gateway: a lone result, then Sync(0)
			if err := s.PutResult(ctx, evidence.Result{InvocationID: id, At: time.Now(), Data: []byte("{}")}); err != nil {
				return nil, err
			}
			pause()
			return nil, s.Sync(ctx, 0)
		}
		recs, err = s.Append(ctx, storetest.Event(corrs[rng.IntN(len(corrs))], "e", id))
		if err != nil {
			return nil, err
		}
		if err := s.PutResult(ctx, evidence.Result{InvocationID: id, At: time.Now(), Data: []byte("{}")}); err != nil {
			return nil, err
		}
		pause()
		return recs, s.Sync(ctx, recs[0].Sequence)
	}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for i := range 100 {
				id := fmt.Sprintf("inv-%d-%d", g, i)
				recs, err := invoke(rng, id)
				mu.Lock()
				switch {
				case err == nil:
					ackedRes[id] = true
					for _, r := range recs {
						acked[r.Sequence] = r.ContentHash
					}
				case refused(err):
					nfail++
				default:
					t.Errorf("invocation %s: unexpected error %v", id, detailed(err))
				}
				mu.Unlock()
			}
		})
	}
	stop := make(chan struct{})
	var saboteur sync.WaitGroup
	saboteur.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(1+i%3*5) * time.Millisecond): // spells of 1, 6 or 11 ms
			}
			q := `REVOKE INSERT ON evidence_result_log FROM ` + role
			if i%2 == 1 {
				q = `GRANT INSERT ON evidence_result_log TO ` + role
			}
			if err := execOn(ctx, dsn, q); err != nil {
				t.Errorf("%s: %v", q, err)
				return
			}
		}
	})
	wg.Wait()
	close(stop)
	saboteur.Wait()
	if err := execOn(ctx, dsn, `GRANT INSERT ON evidence_result_log TO `+role); err != nil {
		t.Fatal(err)
	}
	_ = s.Close() // stores what is still queued, retried results included
	mu.Lock()
	defer mu.Unlock()
	if nfail == 0 || len(ackedRes) == 0 {
		t.Fatalf("%d refused invocations, %d acknowledged: the test exercised nothing", nfail, len(ackedRes))
	}
	s2 := open(t, dsn)
	defer s2.Close()
	checkAcked(t, s2, corrs, acked)
	stored := resultIDs(t, s2)
	for id := range ackedRes {
		if _, ok := slices.BinarySearch(stored, id); !ok {
			t.Errorf("result %s: its putter's Sync returned nil, but it is not stored", id)
		}
	}
	t.Logf("%d acknowledged invocations, %d refused", len(ackedRes), nfail)
}

// TestFailedCommitRememberedOnce: the store remembers the last
// maxFailures failed commits (a record lost before them is no longer
// recognised), and an outage fails both statements of every commit, the
// main one and retrySQL: such a commit is one failure, not two, and it
// holds results, so that Sync(0), which waited for a retried result,
// returns the error.
func TestFailedCommitRememberedOnce(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshDSN(t)
	s2 := open(t, dsn)
	defer s2.Close()
	b, err := s2.Append(ctx, storetest.Event("B", "e", "b"))
	if err != nil || s2.Sync(ctx, b[0].Sequence) != nil {
		t.Fatalf("append: %v", err)
	}
	wdsn, role := leastPrivilege(t, dsn)
	s := open(t, wdsn)
	defer s.Close()
	if err := execOn(ctx, dsn, `REVOKE INSERT ON evidence_result_log FROM `+role); err != nil {
		t.Fatal(err)
	}
	if err := s.PutResult(ctx, evidence.Result{InvocationID: "a", At: time.Now(), Data: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(ctx, 0); err == nil {
		t.Fatal("Sync(0) = nil while the database refuses results")
	}
	// The next commit: a refused block in the main statement, the
	// retried result in retrySQL, both refused.
	if _, err := s.Append(ctx, hinted("B", "x")); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(ctx, 0); err == nil {
		t.Fatal("Sync(0) = nil after the commit of a retried result failed")
	}
	s.mu.Lock()
	n, kept := s.nfail.Load(), len(s.failures)
	s.mu.Unlock()
	if n != 2 || kept != 2 {
		t.Fatalf("%d failures counted, %d remembered, after two failed commits", n, kept)
	}
}

// TestResultTimeOutOfRangeRefused: the database refuses a time outside
// its range, so a result carrying one failed the commit it was in —
// other callers' blocks with it — and then every retry statement for a
// second (resultPatience), every Sync with them. PutResult refuses it
// with ErrInvalid; other callers' appends commit.
func TestResultTimeOutOfRangeRefused(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.FreshDSN(t))
	defer s.Close()
	for _, at := range []time.Time{time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-5000, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if err := s.PutResult(ctx, evidence.Result{InvocationID: "bad", At: at, Data: []byte("{}")}); !errors.Is(err, evidence.ErrInvalid) {
			t.Errorf("PutResult at %v = %v, want ErrInvalid", at, err)
		}
	}
	recs, err := s.Append(ctx, storetest.Event("A", "e", "other"))
	if err == nil {
		err = s.Sync(ctx, recs[0].Sequence)
	}
	if err != nil {
		t.Fatalf("another caller's append after the refused results: %v", err)
	}
	if err := s.PutResult(ctx, evidence.Result{InvocationID: "zero", Data: []byte("{}")}); err != nil {
		t.Fatalf("PutResult at the zero time: %v", err)
	}
	if err := s.Sync(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if got := resultIDs(t, s); !slices.Equal(got, []string{"zero"}) {
		t.Fatalf("Results = %q, want only the zero time's", got)
	}
}

// TestRetriedResultEncodedOnce: an outage retries every result of its
// last second (resultPatience) with every commit, so a result kept for
// retries is encoded by its first retry only and then holds that body,
// compressed, instead of its data; once the database takes results
// again, it is stored as it was put.
func TestRetriedResultEncodedOnce(t *testing.T) {
	ctx := context.Background()
	s, grant := refusingResults(t)
	defer s.Close()
	s.patience = time.Hour
	data := bytes.Repeat([]byte(`{"ok":true,"n":12345},`), 3000)
	if err := s.PutResult(ctx, evidence.Result{InvocationID: "big", At: time.Now(), Data: data}); err != nil {
		t.Fatal(err)
	}
	kept := func() *result {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.queue) != 1 || s.queue[0].res == nil {
			t.Fatalf("queue holds %d items, want the retried result", len(s.queue))
		}
		return s.queue[0].res
	}
	var bodies [][]byte
	for i := range 3 { // the first attempt, then two retries
		if err := s.Sync(ctx, 0); err == nil {
			t.Fatalf("Sync %d = nil while the database refuses results", i+1)
		}
		if r := kept(); i > 0 {
			if r.body == nil || r.r.Data != nil || len(r.body) > len(data)/10 {
				t.Fatalf("after retry %d: body of %d bytes, data of %d: want the compressed body alone", i, len(r.body), len(r.r.Data))
			}
			bodies = append(bodies, r.body)
		}
	}
	if &bodies[0][0] != &bodies[1][0] {
		t.Fatal("the second retry encoded the result again")
	}
	grant()
	if err := s.Sync(ctx, 0); err != nil {
		t.Fatal(err)
	}
	var got []byte
	if err := s.Results(ctx, time.Time{}, func(r evidence.Result) bool { got = r.Data; return true }); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("stored result: %d bytes (%v), want the %d put", len(got), err, len(data))
	}
}
