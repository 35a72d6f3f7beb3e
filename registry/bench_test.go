package registry_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry/api"

	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/sqlite"
)

var quiet = slog.New(slog.DiscardHandler)

// benchKey is the i-th deterministic node key of the benchmarks.
func benchKey(i int) ed25519.PrivateKey {
	seed := sha256.Sum256(fmt.Appendf(nil, "capmesh-bench-node:%d", i))
	return ed25519.NewKeyFromSeed(seed[:])
}

// BenchmarkEd25519Verify is the floor of a signed registration: one
// crypto/ed25519.Verify over a message the size of a descriptor's
// canonical bytes.
func BenchmarkEd25519Verify(b *testing.B) {
	priv := benchKey(0)
	msg := make([]byte, 330)
	sig := ed25519.Sign(priv, msg)
	pub := priv.Public().(ed25519.PublicKey)
	b.ReportAllocs()
	for b.Loop() {
		if !ed25519.Verify(pub, msg, sig) {
			b.Fatal("verify")
		}
	}
}

// signedPool returns n descriptors per key for keys 0..pool-1, each newer
// than the last for its key, as wire bytes (what a registration carries).
func signedPool(pool, n int, caps func(i int) []string) [][]byte {
	base := time.Now()
	out := make([][]byte, n)
	keys := make([]ed25519.PrivateKey, pool)
	for i := range keys {
		keys[i] = benchKey(i)
	}
	for i := range out {
		k := keys[i%pool]
		d := descriptor.New(fmt.Sprintf("agent-%d", i%pool), "N", k.Public().(ed25519.PublicKey), caps(i),
			descriptor.Endpoint{Host: "127.0.0.1", Port: 9000 + i%1000, Scheme: "tcp"}, base.Add(time.Duration(i/pool)*time.Microsecond), time.Hour)
		if err := d.Sign(k); err != nil {
			panic(err)
		}
		out[i], _ = d.MarshalJSON()
	}
	return out
}

func pins(pool int) []string {
	out := make([]string, pool)
	for i := range out {
		out[i] = base64.StdEncoding.EncodeToString(benchKey(i).Public().(ed25519.PublicKey))
	}
	return out
}

// BenchmarkRegisterSigned admits signed descriptors (wire bytes → Parse →
// Node.Register: verify, genesis canonical bytes, TTL, network, trust,
// anti-rollback, index, store write) from a pool of 1,000 pinned keys, in
// memory, on the calling goroutine. Compare with BenchmarkEd25519Verify
// run with -cpu 1.
func BenchmarkRegisterSigned(b *testing.B) {
	const pool = 1000
	n, err := registry.NewNode(registry.Config{Network: "N", TrustedKeys: pins(pool), SweepInterval: time.Hour, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	wires := signedPool(pool, b.N, func(i int) []string { return []string{"cap:" + fmt.Sprint(i%50)} })
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, err := descriptor.Parse(wires[i])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := n.Register(ctx, d); err != nil {
			b.Fatal(err)
		}
	}
}

// find100k is the shared fixture of the 100,000-descriptor benchmarks:
// each descriptor has 3 of 1,000 popular tags (about 300 providers per tag)
// and 1 of 20,000 service tags (5 providers each), registered through Parse
// and Register like real traffic. Built once per process.
var find100k struct {
	once      sync.Once
	n         *registry.Node
	heapPer   float64
	tags      int
	httpURL   string
	rpcSocket string
}

// 1,000 popular tags with ~300 providers each, and 20,000 service tags
// with 5 providers each: a find answers either a crowd or a handful.
const total100k, tags100k, services100k = 100_000, 1000, 20_000

// findShapes are the two result sizes the find benchmarks measure.
var findShapes = []struct {
	name string
	tag  func(i int) string
}{
	{"providers=300", func(i int) string { return fmt.Sprintf("t%d", i%tags100k) }},
	{"providers=5", func(i int) string { return fmt.Sprintf("svc%d", i%services100k) }},
}

func find100kFixture(b *testing.B) {
	find100k.once.Do(func() {
		find100k.tags = tags100k
		wires := signedPool(total100k, total100k, func(i int) []string {
			return []string{fmt.Sprintf("t%d", i%tags100k), fmt.Sprintf("t%d", (i*7+1)%tags100k), fmt.Sprintf("t%d", (i*13+2)%tags100k), fmt.Sprintf("svc%d", i%services100k)}
		})
		ps := pins(total100k)
		var ms0, ms1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms0)
		n, err := registry.NewNode(registry.Config{Network: "N", TrustedKeys: ps, SweepInterval: time.Hour, Logger: quiet})
		if err != nil {
			panic(err)
		}
		ctx := context.Background()
		for _, w := range wires {
			d, err := descriptor.Parse(w)
			if err != nil {
				panic(err)
			}
			if _, err := n.Register(ctx, d); err != nil {
				panic(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&ms1)
		// The wire bytes and pins were allocated before ms0 and are still
		// alive, so the difference is what the node holds.
		runtime.KeepAlive(wires)
		runtime.KeepAlive(ps)
		find100k.n = n
		find100k.heapPer = float64(ms1.HeapAlloc-ms0.HeapAlloc) / total100k

		srv := httptest.NewServer(api.HTTPHandler(n))
		find100k.httpURL = srv.URL
		dir, err := osMkdirTemp()
		if err != nil {
			panic(err)
		}
		find100k.rpcSocket = dir + "/node.sock"
		l, err := net.Listen("unix", find100k.rpcSocket)
		if err != nil {
			panic(err)
		}
		go func() { _ = jsonrpc.NewServer(api.RPC(n), nil).Serve(context.Background(), l) }()
	})
	if find100k.n == nil {
		b.Fatal("fixture failed")
	}
}

// latencies reports p50/p99 of the per-operation times in microseconds,
// under the metric names prefix-p50-µs and prefix-p99-µs.
func latencies(b *testing.B, prefix string, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, prefix+"p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, prefix+"p99-µs")
}

// BenchmarkFind100k: find by capability among 100,000 live descriptors,
// in process, for a tag with ~300 providers and one with 5 (all returned,
// newest first), through Find (a new []Entry per call) and FindFunc (no
// allocation). It reports wall-clock p50/p99, the same percentiles of the
// thread's CPU time per call (cpu-p50/cpu-p99: what the call costs, without
// the time the shared machine's scheduler took the thread away), and the
// heap the node holds per descriptor.
func BenchmarkFind100k(b *testing.B) {
	find100kFixture(b)
	n := find100k.n
	apis := []struct {
		name string
		find func(tag string) int
	}{
		{"Find", func(tag string) int { return len(n.Find(tag, registry.FindOptions{})) }},
		{"FindFunc", func(tag string) int {
			c := 0
			n.FindFunc(tag, registry.FindOptions{}, func(e registry.Entry) bool {
				c += len(e.Endpoint) & 1
				c++
				return true
			})
			return c
		}},
	}
	for _, shape := range findShapes {
		for _, api := range apis {
			b.Run(shape.name+"/"+api.name, func(b *testing.B) {
				names := make([]string, services100k)
				for i := range names {
					names[i] = shape.tag(i)
				}
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				lat := make([]time.Duration, 0, b.N)
				cpu := make([]time.Duration, 0, b.N)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					c0, t := threadCPU(), time.Now()
					if api.find(names[i%len(names)]) == 0 {
						b.Fatal("empty")
					}
					lat = append(lat, time.Since(t))
					cpu = append(cpu, threadCPU()-c0)
				}
				b.StopTimer()
				latencies(b, "", lat)
				if haveThreadCPU {
					latencies(b, "cpu-", cpu)
				}
				b.ReportMetric(find100k.heapPer, "heap-B/descriptor")
			})
		}
	}
}

// BenchmarkFind100kHTTP is the same query as the Genesis-Mesh HTTP shape:
// GET /agents?capability=TAG over loopback (keep-alive), body read whole.
func BenchmarkFind100kHTTP(b *testing.B) {
	find100kFixture(b)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	for _, shape := range findShapes {
		b.Run(shape.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			var bytesRead int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t := time.Now()
				resp, err := c.Get(find100k.httpURL + "/agents?capability=" + url.QueryEscape(shape.tag(i)))
				if err != nil {
					b.Fatal(err)
				}
				nr, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || nr < 1000 {
					b.Fatalf("status %d, %d bytes", resp.StatusCode, nr)
				}
				bytesRead += nr
				lat = append(lat, time.Since(t))
			}
			b.StopTimer()
			latencies(b, "", lat)
			b.ReportMetric(float64(bytesRead)/float64(b.N), "body-B")
		})
	}
}

// BenchmarkFind100kRPC is the same query as ipc.find_capability over the
// node's Unix socket (newline JSON-RPC). The client keeps the result as raw
// JSON: decoding ~1 kB per provider into Go values with encoding/json is
// the consumer's cost (about 20 µs per provider here), not the node's.
func BenchmarkFind100kRPC(b *testing.B) {
	find100kFixture(b)
	c, err := jsonrpc.Dial(context.Background(), "unix", find100k.rpcSocket, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for _, shape := range findShapes {
		b.Run(shape.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t := time.Now()
				var res json.RawMessage
				if err := c.Call(ctx, "ipc.find_capability", map[string]string{"capability": shape.tag(i)}, &res); err != nil {
					b.Fatal(err)
				}
				if !bytes.Contains(res, []byte(`"primal_id":`)) {
					b.Fatal("empty")
				}
				lat = append(lat, time.Since(t))
			}
			b.StopTimer()
			latencies(b, "", lat)
		})
	}
}

// BenchmarkRegisterSignedHTTP is BenchmarkRegisterSigned through the
// Genesis-Mesh HTTP shape: POST /agents over loopback (keep-alive), one
// request at a time.
func BenchmarkRegisterSignedHTTP(b *testing.B) {
	const pool = 1000
	n, err := registry.NewNode(registry.Config{Network: "N", TrustedKeys: pins(pool), SweepInterval: time.Hour, Logger: quiet,
		RateLimits: registry.RateLimits{Agents: registry.RateLimit{PerMinute: -1}}})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	srv := httptest.NewServer(api.HTTPHandler(n))
	defer srv.Close()
	c := srv.Client()
	wires := signedPool(pool, b.N, func(i int) []string { return []string{"cap:" + fmt.Sprint(i%50)} })
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		resp, err := c.Post(srv.URL+"/agents", "application/json", bytes.NewReader(wires[i]))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		lat = append(lat, time.Since(t))
	}
	b.StopTimer()
	latencies(b, "", lat)
}

// BenchmarkRegisterVsVerify interleaves, one for one, a raw
// ed25519.Verify of the registration's own canonical bytes (the floor)
// and the full registration of that descriptor (wire bytes → Parse →
// Node.Register), timing each, so that both see the same machine load.
// It reports the mean of each and ratio = registrations/s ÷
// verifications/s on this goroutine (target ≥ 0.7 with -cpu 1), in wall
// time and in the thread's CPU time.
func BenchmarkRegisterVsVerify(b *testing.B) {
	const pool = 1000
	n, err := registry.NewNode(registry.Config{Network: "N", TrustedKeys: pins(pool), SweepInterval: time.Hour, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	wires := signedPool(pool, b.N, func(i int) []string { return []string{"cap:" + fmt.Sprint(i%50)} })
	type floor struct {
		pub      ed25519.PublicKey
		msg, sig []byte
	}
	floors := make([]floor, b.N)
	for i, w := range wires {
		d, err := descriptor.Parse(w)
		if err != nil {
			b.Fatal(err)
		}
		pub, _ := base64.StdEncoding.DecodeString(d.NodePublicKey)
		sig, _ := base64.StdEncoding.DecodeString(d.Signatures[0].Sig)
		floors[i] = floor{pub, d.CanonicalBytes(), sig}
	}
	ctx := context.Background()
	var tVerify, tRegister, cVerify, cRegister time.Duration
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f := floors[i]
		c0, t0 := threadCPU(), time.Now()
		if !ed25519.Verify(f.pub, f.msg, f.sig) {
			b.Fatal("floor verify")
		}
		c1, t1 := threadCPU(), time.Now()
		d, err := descriptor.Parse(wires[i])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := n.Register(ctx, d); err != nil {
			b.Fatal(err)
		}
		c2, t2 := threadCPU(), time.Now()
		tVerify += t1.Sub(t0)
		tRegister += t2.Sub(t1)
		cVerify += c1 - c0
		cRegister += c2 - c1
	}
	b.StopTimer()
	b.ReportMetric(float64(tVerify.Nanoseconds())/float64(b.N)/1e3, "verify-µs")
	b.ReportMetric(float64(tRegister.Nanoseconds())/float64(b.N)/1e3, "register-µs")
	b.ReportMetric(float64(tVerify)/float64(tRegister), "ratio")
	if haveThreadCPU && cRegister > 0 {
		// The same ratio in thread CPU time: immune to the scheduler taking
		// the thread away in the middle of the longer operation, which on a
		// loaded machine biases the wall-clock ratio down.
		b.ReportMetric(float64(cVerify)/float64(cRegister), "cpu-ratio")
	}
}

// BenchmarkRegisterSignedSQLite is BenchmarkRegisterSigned with the
// embedded durable store (registry/sqlite, WAL, synchronous=NORMAL) that
// capmesh server uses: every registration is one committed transaction.
func BenchmarkRegisterSignedSQLite(b *testing.B) {
	const pool = 1000
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "registry.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	n, err := registry.NewNode(registry.Config{Network: "N", Store: st, TrustedKeys: pins(pool), SweepInterval: time.Hour, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	wires := signedPool(pool, b.N, func(i int) []string { return []string{"cap:" + fmt.Sprint(i%50)} })
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, err := descriptor.Parse(wires[i])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := n.Register(ctx, d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFindDuringSQLiteWrites: FindFunc on a tag with 300 providers
// while another goroutine registers descriptors (of other keys) as fast as
// the SQLite store commits them. Reads must not wait for the disk.
func BenchmarkFindDuringSQLiteWrites(b *testing.B) {
	const readers, writers = 300, 1000
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "registry.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	n, err := registry.NewNode(registry.Config{Network: "N", Store: st, TrustedKeys: pins(readers + writers), SweepInterval: time.Hour, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	for _, w := range signedPool(readers, readers, func(int) []string { return []string{"t"} }) {
		d, _ := descriptor.Parse(w)
		if _, err := n.Register(ctx, d); err != nil {
			b.Fatal(err)
		}
	}
	// Writers use keys readers.. (benchKey(readers+i)); pre-sign plenty.
	var ws [][]byte
	base := time.Now()
	for i := 0; i < 20000; i++ {
		k := benchKey(readers + i%writers)
		d := descriptor.New("w", "N", k.Public().(ed25519.PublicKey), []string{"w"}, descriptor.Endpoint{Host: "h", Port: 1, Scheme: "tcp"}, base.Add(time.Duration(i/writers)*time.Microsecond), time.Hour)
		_ = d.Sign(k)
		w, _ := d.MarshalJSON()
		ws = append(ws, w)
	}
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		c := 0
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- c
				return
			default:
			}
			d, _ := descriptor.Parse(ws[i%len(ws)])
			if _, err := n.Register(ctx, d); err == nil {
				c++
			}
		}
	}()
	lat := make([]time.Duration, 0, b.N)
	start := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		c := 0
		n.FindFunc("t", registry.FindOptions{}, func(registry.Entry) bool { c++; return true })
		if c != readers {
			b.Fatalf("%d providers", c)
		}
		lat = append(lat, time.Since(t))
		time.Sleep(50 * time.Microsecond) // leave room to the writer
	}
	b.StopTimer()
	close(stop)
	b.ReportMetric(float64(<-done)/time.Since(start).Seconds(), "writes/s")
	latencies(b, "", lat)
}
