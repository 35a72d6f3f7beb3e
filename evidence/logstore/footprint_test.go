package logstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/logstore"
	"github.com/capmesh/capmesh/evidence/storetest"
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/jsonrpc"
)

// The footprint of evidence on disk, measured on the governed path: a
// host (JSON-RPC through its local client, the CHP boundary with the
// fixture policy and safety evaluator) writing to a durable logstore. An
// invocation of a safety-gated capability seals five events
// (safety_assessment_started, _completed, safety_approved,
// execution_started, execution_completed) and records its result.

var formats = []struct {
	name         string
	uncompressed bool
}{{"v1-uncompressed", true}, {"v3-compressed", false}}

// openFormat opens a store in dir writing format f.
func openFormat(tb testing.TB, dir string, f int, noSync bool) *logstore.Store {
	tb.Helper()
	s, err := logstore.Open(dir, &logstore.Options{NoSync: noSync, Uncompressed: formats[f].uncompressed, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

type echoIn struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// governedHost returns a host whose evidence goes to store, serving
// kv.echo behind the fixture safety gate, and a local client of it.
func governedHost(tb testing.TB, store evidence.Store) *jsonrpc.Client {
	tb.Helper()
	h, err := host.New(host.Info{Name: "footprint", Version: "1.0.0"}, &host.Config{
		DataDir: tb.TempDir(), Evidence: store, NoAnnounce: true, Logger: slog.New(slog.DiscardHandler),
		Socket: filepath.Join(tb.TempDir(), "f.sock"),
		CHP:    boundary.Config{Policy: boundary.FixturePolicy(), Safety: boundary.FixtureSafety()},
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close() })
	if err := host.Register(h, "kv.echo", func(_ context.Context, in echoIn) (echoIn, error) { return in, nil }); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := h.LocalClient(ctx)
	tb.Cleanup(func() { c.Close(); cancel() })
	return c
}

// invoke makes one governed invocation of kv.echo in correlation corr.
func invoke(ctx context.Context, c *jsonrpc.Client, corr string) error {
	var out echoIn
	return c.Call(ctx, "kv.echo", map[string]any{"key": corr, "value": "v-" + corr, "_meta": map[string]any{"correlation_id": corr}}, &out)
}

// runInvocations makes n invocations from callers goroutines, each in a
// correlation of its own named by prefix.
func runInvocations(tb testing.TB, c *jsonrpc.Client, callers, n int, prefix string) {
	tb.Helper()
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if err := invoke(ctx, c, fmt.Sprint(prefix, i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		tb.Fatal(err)
	}
}

// TestBytesPerInvocation: a governed invocation of a safety-gated
// capability takes at most 1.5 KB of evidence log on disk — one caller,
// where every invocation is a commit (and a block) of its own, and 16
// callers, whose invocations share commits — against ~7 KB uncompressed.
func TestBytesPerInvocation(t *testing.T) {
	const n = 200
	for fi, f := range formats {
		for _, callers := range []int{1, 16} {
			t.Run(fmt.Sprintf("%s/callers%d", f.name, callers), func(t *testing.T) {
				s := openFormat(t, t.TempDir(), fi, false)
				defer s.Close()
				c := governedHost(t, s)
				runInvocations(t, c, callers, n, "corr-")
				if got := s.LastSequence(); got != 5*n {
					t.Fatalf("%d events for %d invocations, want 5 each", got, n)
				}
				recs, err := s.Replay(context.Background(), evidence.Query{CorrelationID: "corr-7"})
				if err != nil || len(recs) != 5 {
					t.Fatalf("replay: %v, %d events", err, len(recs))
				}
				per := float64(s.PhysicalSize()) / n
				t.Logf("%s, %d callers: %.0f bytes/invocation on disk", f.name, callers, per)
				if !f.uncompressed && per > 1536 {
					t.Errorf("%.0f bytes per invocation, want at most 1.5 KB", per)
				}
				if f.uncompressed && per < 6000 {
					t.Errorf("uncompressed: %.0f bytes per invocation: the events are smaller than measured against", per)
				}
			})
		}
	}
}

// BenchmarkGovernedDurable: durable governed invocations (fdatasync
// before the answer) through the host, old format against new in one run;
// reports bytes of log per invocation.
//
//	go test ./evidence/logstore -run '^$' -bench GovernedDurable -benchtime 2s -count 3
func BenchmarkGovernedDurable(b *testing.B) {
	for _, callers := range []int{1, 64} {
		for fi, f := range formats {
			b.Run(fmt.Sprintf("callers%d/%s", callers, f.name), func(b *testing.B) {
				s := openFormat(b, b.TempDir(), fi, false)
				defer s.Close()
				c := governedHost(b, s)
				ctx := context.Background()
				var n atomic.Int64
				b.ResetTimer()
				cpu0 := processCPU()
				if callers == 1 {
					for b.Loop() {
						if err := invoke(ctx, c, fmt.Sprint("c", n.Add(1))); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					b.SetParallelism(callers / 2) // GOMAXPROCS is 2 here; more elsewhere only adds callers
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if err := invoke(ctx, c, fmt.Sprint("c", n.Add(1))); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				b.StopTimer()
				b.ReportMetric(float64(processCPU()-cpu0)/1e3/float64(n.Load()), "cpu-µs/op")
				b.ReportMetric(float64(s.PhysicalSize())/float64(n.Load()), "B/inv")
			})
		}
	}
}

// BenchmarkReplayGoverned: replay of one governed invocation's
// correlation (five events) out of a store of 20,000, filled through the
// host by 64 callers with fsync (so commits group as in production); old
// format against new in one run, p50 and p99.
//
//	go test ./evidence/logstore -run '^$' -bench ReplayGoverned -benchtime 20000x -count 3
func BenchmarkReplayGoverned(b *testing.B) {
	const invocations = 20000
	root := b.TempDir()
	filled := map[string]*logstore.Store{}
	defer func() {
		for _, s := range filled {
			s.Close()
		}
	}()
	for fi, f := range formats {
		b.Run(f.name, func(b *testing.B) {
			s := filled[f.name]
			if s == nil {
				s = openFormat(b, filepath.Join(root, f.name), fi, false)
				filled[f.name] = s
				runInvocations(b, governedHost(b, s), 64, invocations, "corr-")
			}
			replayLatency(b, s, func() string { return fmt.Sprint("corr-", rand.IntN(invocations)) }, 5)
		})
	}
}

// BenchmarkReplayInterleaved: replay of a 10-event correlation out of
// 200,000 events (20,000 correlations × 10, interleaved: every event of a
// correlation in a different commit of 1,000 events of ~600 B), as
// internal/bench's BenchmarkCHPStoreReplay1M at a fifth of its size; old
// format against new in one run, p50 and p99.
//
//	go test ./evidence/logstore -run '^$' -bench ReplayInterleaved -benchtime 20000x -count 3
func BenchmarkReplayInterleaved(b *testing.B) {
	const corrs, per = 20000, 10
	root := b.TempDir()
	filled := map[string]*logstore.Store{}
	defer func() {
		for _, s := range filled {
			s.Close()
		}
	}()
	for fi, f := range formats {
		b.Run(f.name, func(b *testing.B) {
			s := filled[f.name]
			if s == nil {
				s = fillInterleaved(b, filepath.Join(root, f.name), fi, corrs, per)
				filled[f.name] = s
			}
			replayLatency(b, s, func() string { return fmt.Sprint("corr-", rand.IntN(corrs)) }, per)
		})
	}
}

func fillInterleaved(b *testing.B, dir string, format, corrs, per int) *logstore.Store {
	s := openFormat(b, dir, format, true)
	ctx := context.Background()
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
	return s
}

// replayLatency replays b.N correlations named by pick, each of want
// events, and reports p50 and p99.
func replayLatency(b *testing.B, s *logstore.Store, pick func() string, want int) {
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		c := pick()
		t0 := time.Now()
		recs, err := s.Replay(ctx, evidence.Query{CorrelationID: c})
		lat = append(lat, time.Since(t0))
		if err != nil || len(recs) != want {
			b.Fatalf("replay %s: %v (%d)", c, err, len(recs))
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
