// Package storetest is the conformance suite every evidence.Store
// implementation runs: ordering, chaining, queries, atomic batches and
// concurrent appends.
package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"testing"

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

// Run runs the suite; open must return a fresh, empty store.
func Run(t *testing.T, open func(t *testing.T) evidence.Store) {
	ctx := context.Background()
	t.Run("OrderAndChain", func(t *testing.T) {
		s := open(t)
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
	})
	t.Run("Query", func(t *testing.T) {
		s := open(t)
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
	})
	t.Run("AtomicBatch", func(t *testing.T) {
		s := open(t)
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
	})
	t.Run("Concurrent", func(t *testing.T) {
		s := open(t)
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
	})
	t.Run("Closed", func(t *testing.T) {
		s := open(t)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, Event("Z", "e", "1")); !errors.Is(err, evidence.ErrClosed) {
			t.Fatalf("Append after Close = %v", err)
		}
	})
}
