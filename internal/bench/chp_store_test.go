package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/logstore"
	"github.com/capmesh/capmesh/evidence/postgres"
	"github.com/capmesh/capmesh/evidence/postgres/pgtest"
	"github.com/capmesh/capmesh/evidence/sqlite"
	"github.com/capmesh/capmesh/evidence/storetest"
)

// The evidence engines side by side, with the load one governed invocation
// puts on its store: a two-event batch of ~1.3 KB events, a recorded result,
// and a Sync that must return only once all three are durable.
//
//	go test ./internal/bench/ -run '^$' -bench 'CHPStore' -count 6
//
// inv/s counts invocations' worth of evidence (two records and a
// result), so it is directly the ceiling each engine puts on governed
// invocations per second.

var durableEngines = []struct {
	name string
	open func(dir string, nosync bool) (evidence.Store, error)
}{
	{"logstore", func(dir string, nosync bool) (evidence.Store, error) {
		return logstore.Open(dir, &logstore.Options{NoSync: nosync})
	}},
	{"sqlite", func(dir string, nosync bool) (evidence.Store, error) {
		return sqlite.Open(dir, &sqlite.Options{NoSync: nosync})
	}},
	{"postgres", func(dir string, nosync bool) (evidence.Store, error) {
		// The directory names a schema of the test server (pgtest).
		dsn, err := pgtest.SchemaDSN(context.Background(), dir)
		if err != nil {
			return nil, err
		}
		return postgres.Open(context.Background(), dsn, &postgres.Options{NoSync: nosync})
	}},
}

func BenchmarkCHPStoreAppendSync(b *testing.B) {
	body := string(make([]byte, 1200))
	result := make([]byte, 420)
	for _, callers := range []int{1, 64} {
		for _, e := range durableEngines {
			b.Run(fmt.Sprintf("callers%d/%s", callers, e.name), func(b *testing.B) {
				s, err := e.open(filepath.Join(b.TempDir(), "ev"), false)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				rs := s.(evidence.ResultStore)
				ctx := context.Background()
				measure(b, func() {
					split(b, callers, func(i int) error {
						c := fmt.Sprint("c", rand.IntN(1<<30))
						recs, err := s.Append(ctx, storetest.Event(c, "execution_started", body), storetest.Event(c, "execution_completed", body))
						if err == nil {
							err = rs.PutResult(ctx, evidence.Result{InvocationID: c, At: time.Now(), Data: result})
						}
						if err == nil {
							err = s.Sync(ctx, recs[1].Sequence)
						}
						return err
					})
				})
			})
		}
	}
}

// BenchmarkCHPStoreReplay1M replays one 10-event correlation out of a store
// of one million events (100,000 correlations × 10, interleaved, ~600 B
// each) and reports p50/p99 latency. The store is filled once per engine
// (without fsync, which does not change what is read).
func BenchmarkCHPStoreReplay1M(b *testing.B) {
	const corrs, per = 100000, 10
	// The parent runs once; its directory outlives the sub-benchmarks'
	// rounds, so each store is filled once.
	root := b.TempDir()
	filled := map[string]evidence.Store{}
	defer func() {
		for _, s := range filled {
			s.Close()
		}
	}()
	for _, e := range durableEngines {
		b.Run(e.name, func(b *testing.B) {
			s := filled[e.name]
			if s == nil {
				s = fillStore(b, filepath.Join(root, e.name), e.open, corrs, per)
				filled[e.name] = s
			}
			ctx := context.Background()
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
		})
	}
}

// fillStore opens a store in dir and appends corrs×per events to it.
func fillStore(b *testing.B, dir string, open func(string, bool) (evidence.Store, error), corrs, per int) evidence.Store {
	s, err := open(dir, true)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	{
		body := string(make([]byte, 600))
		batch := make([]evidence.Pending, 0, 1000)
		for round := 0; round < per; round++ {
			for c := 0; c < corrs; c++ {
				batch = append(batch, storetest.Event(fmt.Sprint("corr-", c), "execution_started", body))
				if len(batch) == cap(batch) {
					recs, err := s.Append(ctx, batch...)
					if err == nil {
						err = s.Sync(ctx, recs[len(recs)-1].Sequence)
					}
					if err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
		}
	}
	if s.LastSequence() != uint64(corrs*per) {
		b.Fatalf("store holds %d events", s.LastSequence())
	}
	return s
}
