package logstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/storetest"
)

// BenchmarkReplay1M replays one 10-event correlation out of a store of one
// million events (100,000 correlations × 10, interleaved) and reports the
// p50/p99 latency:
//
//	go test ./evidence/logstore/ -run '^$' -bench Replay1M -count 5
func BenchmarkReplay1M(b *testing.B) {
	s, err := Open(b.TempDir(), &Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	const corrs, per = 100000, 10
	body := string(make([]byte, 600))
	batch := make([]evidence.Pending, 0, 1000)
	for round := 0; round < per; round++ {
		for c := 0; c < corrs; c++ {
			batch = append(batch, storetest.Event(fmt.Sprint("corr-", c), "execution_started", body))
			if len(batch) == cap(batch) {
				if _, err := s.Append(ctx, batch...); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
	}
	if s.LastSequence() != corrs*per {
		b.Fatalf("store holds %d events", s.LastSequence())
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		c := fmt.Sprint("corr-", rand.IntN(corrs))
		t0 := time.Now()
		recs, err := s.Replay(ctx, evidence.Query{CorrelationID: c})
		lat = append(lat, time.Since(t0))
		if err != nil || len(recs) != per {
			b.Fatalf("replay %s: %v (%d)", c, err, len(recs))
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkAppendSync is the raw durable append rate with group commit: 64
// writers each appending a 2-event batch and waiting for fsync.
func BenchmarkAppendSync(b *testing.B) {
	s, err := Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	body := string(make([]byte, 600))
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		i := rand.IntN(1 << 30)
		for pb.Next() {
			i++
			c := fmt.Sprint("c", i%1000)
			recs, err := s.Append(ctx, storetest.Event(c, "execution_started", body), storetest.Event(c, "execution_completed", body))
			if err == nil {
				err = s.Sync(ctx, recs[1].Sequence)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}
