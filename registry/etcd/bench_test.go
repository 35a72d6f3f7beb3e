package etcd_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/etcd"
)

// benchKey is the i-th deterministic node key of the benchmarks.
func benchKey(i int) ed25519.PrivateKey {
	seed := sha256.Sum256(fmt.Appendf(nil, "capmesh-etcd-bench:%d", i))
	return ed25519.NewKeyFromSeed(seed[:])
}

func benchPub(i int) string {
	return base64.StdEncoding.EncodeToString(benchKey(i).Public().(ed25519.PublicKey))
}

// signMany signs one descriptor for each key from..from+n-1 (registered
// at at, capability tag(i)), on every core.
func signMany(from, n int, at time.Time, tag func(i int) string) []*descriptor.Descriptor {
	out := make([]*descriptor.Descriptor, n)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				k := benchKey(from + i)
				d := descriptor.New(fmt.Sprintf("agent-%d", from+i), "capmesh", k.Public().(ed25519.PublicKey), []string{tag(i)},
					descriptor.Endpoint{Host: "10.0.0.1", Port: 7000 + i%1000, Scheme: "tcp"}, at, time.Hour)
				if err := d.Sign(k); err != nil {
					panic(err)
				}
				out[i] = d
			}
		}()
	}
	wg.Wait()
	return out
}

func pins(from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = benchPub(from + i)
	}
	return out
}

// benchNode starts a registry node on srv for a benchmark.
func benchNode(b *testing.B, srv *etcdtest.Server, prefix string, trusted []string) (*registry.Node, *etcd.Store) {
	b.Helper()
	st, err := etcd.Open(context.Background(), etcd.Options{Endpoints: srv.Endpoints(), Prefix: prefix, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	n, err := registry.NewNode(registry.Config{Store: st, TrustedKeys: trusted, SweepInterval: time.Hour, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close(); st.Close() })
	return n, st
}

// parallel runs fn(i) for i in [0, n) on workers goroutines and returns
// the wall time.
func parallel(workers, n int, fn func(i int) error) (time.Duration, error) {
	var next atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	t := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					first.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	err, _ := first.Load().(error)
	return time.Since(t), err
}

// BenchmarkRegisterVsBarePut: signed registrations through a registry
// node on etcd (signature check, trust, anti-rollback, a compare-and-swap
// transaction of the descriptor, the index, the watch event) against bare
// clientv3 put-with-lease calls of the same bytes, on the same etcd, with
// the same 16 concurrent callers. The two alternate in rounds of
// registerRound calls (node first, then bare), so that the shared
// machine's drift falls on both; it reports both overall rates, their
// ratio, and the median of the rounds' ratios ("node/bare-median"), which
// load spikes sway least. Run with -benchtime=4000x or more (b.N distinct
// node keys).
func BenchmarkRegisterVsBarePut(b *testing.B) {
	const workers = 16
	srv := etcdtest.Start(b)
	n, st := benchNode(b, srv, "/bench-reg/", pins(0, max(b.N, 1)))
	ds := signMany(0, b.N, time.Now(), func(i int) string { return fmt.Sprintf("svc%03d", i%1000) })
	vals := make([]string, b.N)
	for i, d := range ds {
		w, _ := d.MarshalJSON()
		vals[i] = string(make([]byte, 8)) + string(w) // the store's framing
	}
	ctx := context.Background()
	lease, err := st.Client().Grant(ctx, 3600)
	if err != nil {
		b.Fatal(err)
	}
	var nodeT, bareT time.Duration
	var ratios []float64
	b.ResetTimer()
	for lo := 0; lo < b.N; lo += registerRound {
		hi := min(b.N, lo+registerRound)
		tn, err := parallel(workers, hi-lo, func(i int) error {
			_, err := n.Register(ctx, ds[lo+i])
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		tb, err := parallel(workers, hi-lo, func(i int) error {
			_, err := st.Client().Put(ctx, fmt.Sprintf("/bench-bare/%d", lo+i), vals[lo+i], clientv3.WithLease(lease.ID))
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		nodeT, bareT = nodeT+tn, bareT+tb
		ratios = append(ratios, tb.Seconds()/tn.Seconds())
	}
	b.StopTimer()
	node, bare := float64(b.N)/nodeT.Seconds(), float64(b.N)/bareT.Seconds()
	b.ReportMetric(node, "node-reg/s")
	b.ReportMetric(bare, "bare-put/s")
	b.ReportMetric(node/bare, "node/bare")
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "node/bare-median")
	b.ReportMetric(float64(len(vals[0])), "value-B")
}

// registerRound is how many calls of each kind BenchmarkRegisterVsBarePut
// makes back to back.
const registerRound = 500

// BenchmarkFleet100k: three registry nodes on one etcd holding 100,000
// signed descriptors (20,000 tags of 5 providers). Node A registers new
// descriptors at up to 1,000/s from 16 callers for 5 s while nodes B and
// C answer Find (a tag's 5 providers, newest first) in a loop and watch:
// it reports Find's p50/p99 on B and C during the writes (wall clock and
// the thread's CPU time: "find-cpu-"), and how long a registration made on
// A takes to be in B's and C's index (from the call on A to the event on
// the other node: p50/p99). Run with -benchtime=1x.
func BenchmarkFleet100k(b *testing.B) {
	const total, tags, extra = 100_000, 20_000, 8_000
	srv := etcdtest.Start(b)
	loader, err := etcd.Open(context.Background(), etcd.Options{Endpoints: srv.Endpoints(), Prefix: "/fleet100k/", Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer loader.Close()
	tag := func(i int) string { return fmt.Sprintf("svc%05d", i%tags) }
	preload(b, loader, signMany(0, total, time.Now(), tag))
	trusted := pins(0, total+extra)
	a, _ := benchNode(b, srv, "/fleet100k/", trusted)
	bn, _ := benchNode(b, srv, "/fleet100k/", trusted)
	cn, _ := benchNode(b, srv, "/fleet100k/", trusted)
	if got := len(bn.Find("svc00007", registry.FindOptions{})); got != total/tags {
		b.Fatalf("b finds %d providers of svc00007, want %d", got, total/tags)
	}
	writes := signMany(total, extra, time.Now(), func(i int) string { return "new" + tag(i) })
	for b.Loop() {
		find, cpu, vis, rate := fleetRun(b, a, []*registry.Node{bn, cn}, writes, tags)
		latencies(b, "find-", find)
		if haveThreadCPU {
			latencies(b, "find-cpu-", cpu)
		}
		latencies(b, "visible-", vis)
		b.ReportMetric(rate, "writes/s")
	}
}

// preload writes descriptors straight into the store, 100 a transaction.
func preload(b *testing.B, st *etcd.Store, ds []*descriptor.Descriptor) {
	b.Helper()
	_, err := parallel(8, (len(ds)+99)/100, func(j int) error {
		var ops []registry.Op
		for _, d := range ds[j*100 : min(len(ds), j*100+100)] {
			w, _ := d.MarshalJSON()
			ops = append(ops, registry.Op{Record: registry.Record{Kind: "descriptor", Key: d.NodePublicKey, Value: w, ExpiresAt: d.ExpiresAt.Instant()}})
		}
		return st.Apply(context.Background(), ops...)
	})
	if err != nil {
		b.Fatal(err)
	}
}

// fleetRun is one measurement of BenchmarkFleet100k.
func fleetRun(b *testing.B, a *registry.Node, readers []*registry.Node, writes []*descriptor.Descriptor, tags int) (find, cpu, vis []time.Duration, rate float64) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sent sync.Map // key → time.Time the registration was sent
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, r := range readers {
		since := r.Version()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				rev, evs, err := r.Watch(ctx, since, nil, time.Second)
				if err != nil {
					return
				}
				since = rev
				now := time.Now()
				for _, ev := range evs {
					if t, ok := sent.Load(ev.Key); ok {
						mu.Lock()
						vis = append(vis, now.Sub(t.(time.Time)))
						mu.Unlock()
					}
				}
			}
		}()
	}
	const writers, perWriter, dur = 16, 63, 5 * time.Second // ≈1,000/s
	var done atomic.Int64
	var next atomic.Int64
	start := time.Now()
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second / perWriter)
			defer tick.Stop()
			for time.Since(start) < dur {
				<-tick.C
				i := int(next.Add(1) - 1)
				if i >= len(writes) {
					return
				}
				sent.Store(writes[i].NodePublicKey, time.Now())
				if _, err := a.Register(ctx, writes[i]); err == nil {
					done.Add(1)
				}
			}
		}()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	names := make([]string, tags)
	for i := range names {
		names[i] = fmt.Sprintf("svc%05d", i)
	}
	for i := 0; time.Since(start) < dur; i++ {
		r := readers[i%len(readers)]
		c0, t := threadCPU(), time.Now()
		if len(r.Find(names[(i*7919)%tags], registry.FindOptions{})) == 0 {
			b.Error("empty find")
		}
		find = append(find, time.Since(t))
		cpu = append(cpu, threadCPU()-c0)
		time.Sleep(100 * time.Microsecond) // leave the cores to the writers
	}
	rate = float64(done.Load()) / time.Since(start).Seconds()
	time.Sleep(time.Second) // the last writes reach the readers
	cancel()
	wg.Wait()
	return find, cpu, vis, rate
}

// latencies reports p50 and p99 of ds as metrics named prefix+p50-µs.
func latencies(b *testing.B, prefix string, ds []time.Duration) {
	if len(ds) == 0 {
		b.Errorf("no %s samples", prefix)
		return
	}
	slices.Sort(ds)
	at := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))]) / float64(time.Microsecond) }
	b.ReportMetric(at(0.50), prefix+"p50-µs")
	b.ReportMetric(at(0.99), prefix+"p99-µs")
	b.ReportMetric(float64(len(ds)), prefix+"samples")
}
