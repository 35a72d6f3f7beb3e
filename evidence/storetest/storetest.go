// Package storetest is the conformance suite every evidence.Store
// implementation runs: ordering, chaining, queries, atomic batches and
// concurrent appends (Run); for durable engines also reopening and recorded
// results (RunDurable) and survival of SIGKILL (Crash).
package storetest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capmesh/capmesh/evidence"
	"github.com/google/go-cmp/cmp"
)

// Event builds a Pending record whose content hash is sha256(prev|seq|body)
// and whose data is "seq:prev:body", so a test can check chaining and
// ordering without the CHP event format.
func Event(corr, typ, body string) evidence.Pending {
	return evidence.Pending{CorrelationID: corr, EventType: typ, Seal: func(seq uint64, prev string) (string, []byte, error) {
		sum := sha256.Sum256(fmt.Appendf(nil, "%s|%d|%s", prev, seq, body))
		return hex.EncodeToString(sum[:]), fmt.Appendf(nil, "%d:%s:%s", seq, prev, body), nil
	}}
}

// EventTo is Event sealed through a Sealer only (no Seal), the way the CHP
// boundary hands records to a store. short makes the content hash 8 hex
// digits instead of 64, to exercise a store's handling of other lengths.
func EventTo(corr, typ, body string, short bool) evidence.Pending {
	return evidence.Pending{CorrelationID: corr, EventType: typ, Sealer: evidence.SealerFunc(func(dst []byte, seq uint64, prev string) ([]byte, []byte, error) {
		sum := sha256.Sum256(fmt.Appendf(nil, "%s|%d|%s", prev, seq, body))
		h := hex.AppendEncode(nil, sum[:])
		if short {
			h = h[:8]
		}
		return h, fmt.Appendf(dst, "%d:%s:%s", seq, prev, body), nil
	})}
}

// VerifyChain checks that recs link from genesis and recomputes each hash.
func VerifyChain(recs []evidence.Record, bodies []string) error {
	prev := ""
	var last uint64
	for i, r := range recs {
		if r.PrevHash != prev {
			return fmt.Errorf("record %d (seq %d): prev %q, want %q", i, r.Sequence, r.PrevHash, prev)
		}
		if r.Sequence <= last {
			return fmt.Errorf("record %d: sequence %d not increasing", i, r.Sequence)
		}
		sum := sha256.Sum256(fmt.Appendf(nil, "%s|%d|%s", prev, r.Sequence, bodies[i]))
		if h := hex.EncodeToString(sum[:]); h != r.ContentHash {
			return fmt.Errorf("record %d: hash mismatch", i)
		}
		prev, last = r.ContentHash, r.Sequence
	}
	return nil
}

// Run runs the suite; open must return a fresh, empty store. Each check
// runs as a subtest on a store of its own.
func Run(t *testing.T, open func(t *testing.T) evidence.Store) {
	for _, c := range suite {
		t.Run(c.name, func(t *testing.T) { c.run(t, open(t)) })
	}
}

// suite is Run's table of checks, each given a fresh store it closes.
var suite = []struct {
	name string
	run  func(t *testing.T, s evidence.Store)
}{
	{"OrderAndChain", testOrderAndChain},
	{"Query", testQuery},
	{"AtomicBatch", testAtomicBatch},
	{"Concurrent", testConcurrent},
	{"Sealer", testSealer},
	{"LongChains", testLongChains},
	{"AppendSeq", testAppendSeq},
	{"Closed", testClosed},
}

// testOrderAndChain: records take consecutive global sequences, chain per
// correlation, keep their data verbatim and are counted by type.
func testOrderAndChain(t *testing.T, s evidence.Store) {
	ctx := context.Background()
	defer s.Close()
	var bodies []string
	for i := 0; i < 5; i++ {
		b := fmt.Sprintf("a%d", i)
		bodies = append(bodies, b)
		if _, err := s.Append(ctx, Event("A", "execution_started", b), Event("B", "x", "b")); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.LastSequence(); got != 10 {
		t.Fatalf("LastSequence = %d, want 10", got)
	}
	if err := s.Sync(ctx, 10); err != nil {
		t.Fatal(err)
	}
	recs, err := s.Replay(ctx, evidence.Query{CorrelationID: "A"})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, r := range recs {
		seqs = append(seqs, r.Sequence)
	}
	if diff := cmp.Diff([]uint64{1, 3, 5, 7, 9}, seqs); diff != "" {
		t.Errorf("sequences (-want +got):\n%s", diff)
	}
	if err := VerifyChain(recs, bodies); err != nil {
		t.Error(err)
	}
	if string(recs[2].Data) != fmt.Sprintf("5:%s:a2", recs[1].ContentHash) {
		t.Errorf("data not kept verbatim: %q", recs[2].Data)
	}
	if n, _ := s.Count(ctx, "A", "execution_started"); n != 5 {
		t.Errorf("Count = %d, want 5", n)
	}
	if n, _ := s.Count(ctx, "A", "x"); n != 0 {
		t.Errorf("Count other type = %d, want 0", n)
	}
}

// testQuery: Replay honours After and Limit.
func testQuery(t *testing.T, s evidence.Store) {
	ctx := context.Background()
	defer s.Close()
	for i := 0; i < 6; i++ {
		if _, err := s.Append(ctx, Event("Q", "e", fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		q    evidence.Query
		want []uint64
	}{
		{evidence.Query{CorrelationID: "Q", Limit: 2}, []uint64{1, 2}},
		{evidence.Query{CorrelationID: "Q", After: 2}, []uint64{3, 4, 5, 6}},
		{evidence.Query{CorrelationID: "Q", After: 2, Limit: 3}, []uint64{3, 4, 5}},
		{evidence.Query{CorrelationID: "Q", After: 6}, nil},
		{evidence.Query{CorrelationID: "missing"}, nil},
	} {
		recs, err := s.Replay(ctx, c.q)
		if err != nil {
			t.Fatal(err)
		}
		var got []uint64
		for _, r := range recs {
			got = append(got, r.Sequence)
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%+v (-want +got):\n%s", c.q, diff)
		}
	}
}

// testAtomicBatch: a batch whose sealing fails leaves nothing behind; an
// invalid record is refused; a batch chains within itself.
func testAtomicBatch(t *testing.T, s evidence.Store) {
	ctx := context.Background()
	defer s.Close()
	boom := errors.New("seal failed")
	bad := evidence.Pending{CorrelationID: "C", EventType: "e", Seal: func(uint64, string) (string, []byte, error) { return "", nil, boom }}
	if _, err := s.Append(ctx, Event("C", "e", "1"), bad); !errors.Is(err, boom) {
		t.Fatalf("Append = %v, want seal error", err)
	}
	if s.LastSequence() != 0 {
		t.Fatalf("failed batch left sequence %d", s.LastSequence())
	}
	if recs, _ := s.Replay(ctx, evidence.Query{CorrelationID: "C"}); len(recs) != 0 {
		t.Fatalf("failed batch left %d records", len(recs))
	}
	badTo := evidence.Pending{CorrelationID: "C", EventType: "e", Sealer: evidence.SealerFunc(func(dst []byte, _ uint64, _ string) ([]byte, []byte, error) {
		return nil, nil, boom
	})}
	if _, err := s.Append(ctx, EventTo("C", "e", "1", false), badTo); !errors.Is(err, boom) {
		t.Fatalf("Append = %v, want Sealer error", err)
	}
	if s.LastSequence() != 0 {
		t.Fatalf("failed Sealer batch left sequence %d", s.LastSequence())
	}
	if _, err := s.Append(ctx, evidence.Pending{CorrelationID: "", EventType: "e", Seal: bad.Seal}); !errors.Is(err, evidence.ErrInvalid) {
		t.Fatalf("empty correlation accepted: %v", err)
	}
	recs, err := s.Append(ctx, Event("C", "e", "1"), Event("C", "e", "2"))
	if err != nil {
		t.Fatal(err)
	}
	if recs[1].PrevHash != recs[0].ContentHash || recs[0].Sequence != 1 {
		t.Fatalf("batch not chained within itself: %+v", recs)
	}
}

// testConcurrent: concurrent appends and syncs keep every chain intact and
// lose nothing.
func testConcurrent(t *testing.T, s evidence.Store) {
	ctx := context.Background()
	defer s.Close()
	const workers, each = 16, 50
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				recs, err := s.Append(ctx, Event(fmt.Sprint("corr", w%4), "e", fmt.Sprint(w, "-", i)))
				if err == nil {
					err = s.Sync(ctx, recs[0].Sequence)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if s.LastSequence() != workers*each {
		t.Fatalf("LastSequence = %d", s.LastSequence())
	}
	total := 0
	for c := 0; c < 4; c++ {
		recs, err := s.Replay(ctx, evidence.Query{CorrelationID: fmt.Sprint("corr", c)})
		if err != nil {
			t.Fatal(err)
		}
		prev := ""
		for _, r := range recs {
			if r.PrevHash != prev {
				t.Fatalf("corr%d broken at seq %d", c, r.Sequence)
			}
			prev = r.ContentHash
		}
		total += len(recs)
	}
	if total != workers*each {
		t.Fatalf("replayed %d records, want %d", total, workers*each)
	}
}

// testSealer: records sealed through a Sealer (the boundary's way), of any
// hash length, chain with Seal-sealed ones.
func testSealer(t *testing.T, s evidence.Store) {
	ctx := context.Background()
	defer s.Close()
	recs, err := s.Append(ctx, EventTo("T", "e", "a", false), Event("T", "e", "b"), EventTo("T", "e", "c", true), EventTo("U", "e", "d", true))
	if err != nil {
		t.Fatal(err)
	}
	if recs[2].PrevHash != recs[1].ContentHash || len(recs[2].ContentHash) != 8 {
		t.Fatalf("batch not chained: %+v", recs)
	}
	if _, err := s.Append(ctx, EventTo("T", "e", "e", false)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Replay(ctx, evidence.Query{CorrelationID: "T"})
	if err != nil {
		t.Fatal(err)
	}
	prev := ""
	for i, r := range got {
		body := []string{"a", "b", "c", "e"}[i]
		if want := fmt.Sprintf("%d:%s:%s", r.Sequence, prev, body); string(r.Data) != want || r.PrevHash != prev {
			t.Fatalf("record %d: data %q prev %q, want %q prev %q", i, r.Data, r.PrevHash, want, prev)
		}
		prev = r.ContentHash
	}
	if len(got) != 4 || got[3].Sequence != 5 {
		t.Fatalf("replayed %d records", len(got))
	}
}

// testLongChains: replay pages through long interleaved chains and counts
// cover every event type.
func testLongChains(t *testing.T, s evidence.Store) {
	ctx := context.Background()
	// Three correlations interleaved, in batches of varying size (some
	// larger than any small-batch path), records of six event types:
	// replay pages through chains far longer than a short
	// correlation's, and counts cover every type.
	defer s.Close()
	corrs := []string{"L0", "L1", "L2"}
	types := []string{"t0", "t1", "t2", "t3", "t4", "t5"}
	seqs := map[string][]uint64{}
	bodies := map[string][]string{}
	counts := map[string]map[string]int{}
	n := 0
	for batch := 1; n < 600; batch = batch%40 + 7 {
		var ps []evidence.Pending
		for range batch {
			c, typ := corrs[n%3], types[n/3%len(types)]
			b := fmt.Sprint("long-", n)
			if n%2 == 0 {
				ps = append(ps, Event(c, typ, b))
			} else {
				ps = append(ps, EventTo(c, typ, b, false))
			}
			bodies[c] = append(bodies[c], b)
			if counts[c] == nil {
				counts[c] = map[string]int{}
			}
			counts[c][typ]++
			n++
		}
		recs, err := s.Append(ctx, ps...)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			seqs[r.CorrelationID] = append(seqs[r.CorrelationID], r.Sequence)
		}
	}
	for _, c := range corrs {
		all, err := s.Replay(ctx, evidence.Query{CorrelationID: c})
		if err != nil {
			t.Fatal(err)
		}
		if err := VerifyChain(all, bodies[c]); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		want := seqs[c]
		for _, q := range []evidence.Query{{Limit: 7}, {After: want[5]}, {After: want[100], Limit: 50},
			{After: want[len(want)-2]}, {After: want[len(want)-1]}, {After: want[0] - 1, Limit: 1}, {After: want[150] + 1, Limit: 3}} {
			q.CorrelationID = c
			recs, err := s.Replay(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			var got, exp []uint64
			for _, r := range recs {
				got = append(got, r.Sequence)
			}
			for _, sq := range want {
				if sq > q.After && (q.Limit == 0 || len(exp) < q.Limit) {
					exp = append(exp, sq)
				}
			}
			if diff := cmp.Diff(exp, got); diff != "" {
				t.Errorf("%s after %d limit %d (-want +got):\n%s", c, q.After, q.Limit, diff)
			}
		}
		for _, typ := range append(types, "none") {
			if got, _ := s.Count(ctx, c, typ); got != counts[c][typ] {
				t.Errorf("Count(%s, %s) = %d, want %d", c, typ, got, counts[c][typ])
			}
		}
	}
}

// testAppendSeq: evidence.AppendSeq appends exactly what Append would.
func testAppendSeq(t *testing.T, s evidence.Store) {
	ctx := context.Background()
	// evidence.AppendSeq (the store's fast path when it has one)
	// appends exactly what Append would.
	defer s.Close()
	var bodies []string
	for i := range 5 {
		a, b := fmt.Sprint("s", 2*i), fmt.Sprint("s", 2*i+1)
		bodies = append(bodies, a, b)
		last, err := evidence.AppendSeq(ctx, s, EventTo("S", "e", a, false), Event("S", "f", b))
		if err != nil {
			t.Fatal(err)
		}
		if want := uint64(2*i + 2); last != want || s.LastSequence() != want {
			t.Fatalf("AppendSeq = %d, LastSequence %d, want %d", last, s.LastSequence(), want)
		}
	}
	recs, err := s.Replay(ctx, evidence.Query{CorrelationID: "S"})
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyChain(recs, bodies); err != nil {
		t.Fatal(err)
	}
	if _, err := evidence.AppendSeq(ctx, s, Event("", "e", "x")); !errors.Is(err, evidence.ErrInvalid) {
		t.Fatalf("AppendSeq of an invalid record = %v", err)
	}
}

// testClosed: a closed store refuses appends and reads cleanly.
func testClosed(t *testing.T, s evidence.Store) {
	ctx := context.Background()
	if _, err := s.Append(ctx, Event("Z", "e", "0")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, Event("Z", "e", "1")); !errors.Is(err, evidence.ErrClosed) {
		t.Fatalf("Append after Close = %v", err)
	}
	// Reading a closed store fails cleanly, whatever it held.
	if recs, err := s.Replay(ctx, evidence.Query{CorrelationID: "Z"}); !errors.Is(err, evidence.ErrClosed) {
		t.Fatalf("Replay after Close = %d records, %v", len(recs), err)
	}
	if _, err := s.Count(ctx, "Z", "e"); !errors.Is(err, evidence.ErrClosed) {
		t.Fatalf("Count after Close = %v", err)
	}
}

// RunDurable checks what a durable store adds: records and results survive
// Close and reopen, chains continue across it, and Results lists results
// newest first from a given time. open must open (creating if needed) the
// store kept in dir; the store must implement evidence.ResultStore.
func RunDurable(t *testing.T, open func(t *testing.T, dir string) evidence.Store) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	rs, ok := s.(evidence.ResultStore)
	if !ok {
		t.Fatalf("%s does not implement evidence.ResultStore", s.Name())
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var bodies []string
	for i := 0; i < 6; i++ {
		b := fmt.Sprint("d", i)
		bodies = append(bodies, b)
		p := Event("D", "execution_started", b)
		if i%2 == 1 {
			p = EventTo("D", "execution_started", b, false)
		}
		recs, err := s.Append(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if err := rs.PutResult(ctx, evidence.Result{InvocationID: fmt.Sprint("inv-", i), At: t0.Add(time.Duration(i) * time.Minute),
			Data: []byte(fmt.Sprintf(`{"n":%d}`, i))}); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(ctx, recs[0].Sequence); err != nil {
			t.Fatal(err)
		}
	}
	if err := rs.PutResult(ctx, evidence.Result{At: t0}); !errors.Is(err, evidence.ErrInvalid) {
		t.Errorf("result without id: %v, want ErrInvalid", err)
	}
	// Buffered, never synced: Close must still keep it.
	if _, err := s.Append(ctx, Event("D", "execution_completed", "tail")); err != nil {
		t.Fatal(err)
	}
	bodies = append(bodies, "tail")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, dir)
	defer s.Close()
	rs = s.(evidence.ResultStore)
	if s.LastSequence() != 7 {
		t.Fatalf("reopened LastSequence = %d, want 7", s.LastSequence())
	}
	recs, err := s.Replay(ctx, evidence.Query{CorrelationID: "D"})
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyChain(recs, bodies); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Count(ctx, "D", "execution_started"); n != 6 {
		t.Errorf("Count after reopen = %d, want 6", n)
	}
	more, err := s.Append(ctx, Event("D", "x", "after"))
	if err != nil || more[0].Sequence != 8 || more[0].PrevHash != recs[len(recs)-1].ContentHash {
		t.Fatalf("append after reopen does not continue the chain: %v %+v", err, more)
	}
	var got []string
	if err := rs.Results(ctx, t0.Add(2*time.Minute), func(r evidence.Result) bool {
		got = append(got, fmt.Sprintf("%s %s %s", r.InvocationID, r.At.UTC().Format(time.RFC3339), r.Data))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`inv-5 2026-01-01T00:05:00Z {"n":5}`, `inv-4 2026-01-01T00:04:00Z {"n":4}`,
		`inv-3 2026-01-01T00:03:00Z {"n":3}`, `inv-2 2026-01-01T00:02:00Z {"n":2}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Results (-want +got):\n%s", diff)
	}
	n := 0
	_ = rs.Results(ctx, time.Time{}, func(evidence.Result) bool { n++; return n < 2 })
	if n != 2 {
		t.Errorf("Results did not stop when fn returned false: %d calls", n)
	}
}

// Crash is the SIGKILL durability test, shared by the durable engines. The
// test calling it is re-executed as a child process that appends records and
// results from several goroutines and acknowledges each on stdout once its
// Sync returned; the parent kills the child with SIGKILL at a random moment,
// reopens the store and checks that every acknowledged record and result
// survived and every chain verifies — several rounds over one store.
//
// A test function must call Crash first thing: in the child it never
// returns.
func Crash(t *testing.T, open func(dir string) (evidence.Store, error)) {
	const env = "STORETEST_CRASH_DIR"
	if dir := os.Getenv(env); dir != "" {
		crashChild(dir, open)
		return
	}
	if testing.Short() {
		t.Skip("crash test spawns processes")
	}
	dir := t.TempDir()
	acked := map[uint64]string{}
	results := map[string]bool{}
	for round := 0; round < 6; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$")
		cmd.Env = append(os.Environ(), env+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		// Wait until the child is appending, then kill it at a random moment.
		if !sc.Scan() {
			t.Fatalf("child produced no output")
		}
		if sc.Text() != "ready" {
			t.Fatalf("child: %s", sc.Text())
		}
		deadline := time.Now().Add(time.Duration(20+rand.IntN(80)) * time.Millisecond)
		go func() {
			time.Sleep(time.Until(deadline))
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}()
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 3 && f[0] == "ack":
				seq, _ := strconv.ParseUint(f[1], 10, 64)
				acked[seq] = f[2]
			case len(f) == 2 && f[0] == "res":
				results[f[1]] = true
			}
		}
		_ = cmd.Wait()
		s, err := open(dir)
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		ctx := context.Background()
		corrs := map[string]bool{}
		for seq, corr := range acked {
			corrs[corr] = true
			recs, err := s.Replay(ctx, evidence.Query{CorrelationID: corr, After: seq - 1, Limit: 1})
			if err != nil || len(recs) != 1 || recs[0].Sequence != seq {
				t.Fatalf("round %d: acknowledged record %d of %s lost", round, seq, corr)
			}
		}
		for corr := range corrs {
			recs, err := s.Replay(ctx, evidence.Query{CorrelationID: corr})
			if err != nil {
				t.Fatal(err)
			}
			prev := ""
			for _, r := range recs {
				parts := strings.SplitN(string(r.Data), ":", 3)
				sum := sha256.Sum256(fmt.Appendf(nil, "%s|%d|%s", prev, r.Sequence, parts[2]))
				if r.PrevHash != prev || hex.EncodeToString(sum[:]) != r.ContentHash {
					t.Fatalf("round %d: correlation %s broken at sequence %d", round, corr, r.Sequence)
				}
				prev = r.ContentHash
			}
		}
		found := map[string]bool{}
		if err := s.(evidence.ResultStore).Results(ctx, time.Time{}, func(r evidence.Result) bool {
			found[r.InvocationID] = true
			return true
		}); err != nil {
			t.Fatal(err)
		}
		for id := range results {
			if !found[id] {
				t.Fatalf("round %d: acknowledged result %s lost", round, id)
			}
		}
		s.Close()
	}
	if len(acked) == 0 || len(results) == 0 {
		t.Fatal("nothing was acknowledged")
	}
	t.Logf("%d acknowledged records and %d results survived 6 SIGKILLs", len(acked), len(results))
}

func crashChild(dir string, open func(string) (evidence.Store, error)) {
	s, err := open(dir)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	rs := s.(evidence.ResultStore)
	ctx := context.Background()
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(w, "ready")
	w.Flush()
	base := rand.Uint64()
	for g := 0; g < 4; g++ {
		go func() {
			for i := 0; ; i++ {
				corr := fmt.Sprint("k", rand.IntN(8))
				recs, err := s.Append(ctx, Event(corr, "execution_started", fmt.Sprint(i)), Event(corr, "execution_completed", fmt.Sprint(i)))
				if err != nil {
					os.Exit(2)
				}
				id := fmt.Sprintf("inv-%x-%d-%d", base, g, i)
				if err := rs.PutResult(ctx, evidence.Result{InvocationID: id, At: time.Now(), Data: []byte(`{}`)}); err != nil {
					os.Exit(3)
				}
				if err := s.Sync(ctx, recs[1].Sequence); err != nil {
					os.Exit(4)
				}
				mu.Lock()
				fmt.Fprintf(w, "ack %d %s\nack %d %s\nres %s\n", recs[0].Sequence, corr, recs[1].Sequence, corr, id)
				w.Flush()
				mu.Unlock()
			}
		}()
	}
	select {}
}
