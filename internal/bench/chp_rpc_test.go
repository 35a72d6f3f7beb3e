package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/chphttp"
	"github.com/capmesh/capmesh/chp/chprpc"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/logstore"
	"github.com/capmesh/capmesh/evidence/sqlite"
	"github.com/capmesh/capmesh/jsonrpc"
)

// Benchmarks of the CHP boundary beside their floor: the same method served
// bare by the same jsonrpc server (an ordinary, non-inline handler, so a
// goroutine per call as for capability calls), then governed by a
// boundary.Boundary with each evidence store. Every governed call runs the whole
// pipeline: envelope synthesis, gates, handler, two sealed events, the
// idempotent-replay record and — for the durable stores — fsync before the
// answer (group commit).
//
//	go test ./internal/bench/ -run '^$' -bench 'CHP' -count 6 -benchtime 2s
//
// Metrics: inv/s is invocations answered per second (wall clock); cpu-µs/op
// is the process's CPU time (user+sys, client and server) per invocation,
// which on this shared machine says more than wall time: on an idle 2-core
// machine throughput is bounded by 2 s / cpu-µs/op.

// chpRequest is what every caller sends: a direct capability call.
var chpRequest = []byte(`{"jsonrpc":"2.0","method":"kv.get","params":{"key":"k1"},"id":1}` + "\n")

func echoPayload(_ context.Context, p json.RawMessage) (json.RawMessage, error) { return p, nil }

// chpStores are the evidence engines under test; "" is the bare floor.
var chpStores = []string{"bare", "memory", "logstore", "sqlite", "postgres"}

// openStore opens a fresh store of kind in a temporary directory.
func openStore(b *testing.B, kind string) evidence.Store {
	var s evidence.Store
	var err error
	switch kind {
	case "memory":
		s = evidence.NewMemory()
	case "logstore":
		s, err = logstore.Open(filepath.Join(b.TempDir(), "ev"), nil)
	case "sqlite":
		s, err = sqlite.Open(filepath.Join(b.TempDir(), "ev"), nil)
	case "postgres":
		s = openPostgres(b)
	default:
		b.Fatalf("unknown store %q", kind)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// governed returns a boundary over a fresh store of kind with the echo
// capability kv.get registered, as a host registers one.
func governed(b *testing.B, kind string) *boundary.Boundary {
	return governedOn(b, openStore(b, kind))
}

// governedOn is governed over store s.
func governedOn(b *testing.B, s evidence.Store) *boundary.Boundary {
	bd, err := boundary.New(boundary.Config{HostID: "bench-host", Store: s})
	if err != nil {
		b.Fatal(err)
	}
	if err := bd.Register(boundary.Capability{Descriptor: chp.CapabilityDescriptor{ID: "kv.get", Version: "1.0.0", Description: "echo"},
		Handler: echoPayload}); err != nil {
		b.Fatal(err)
	}
	return bd
}

// kvHandler is kv.get for store kind: bare, or through a boundary.
func kvHandler(b *testing.B, kind string) jsonrpc.Handler {
	if kind == "bare" {
		return jsonrpc.HandlerFunc(func(ctx context.Context, r *jsonrpc.Request) (any, error) {
			out, err := echoPayload(ctx, r.Params)
			return out, err
		})
	}
	return chprpc.DirectHandler(governed(b, kind))
}

// cpuClock reads the process's CPU time.
func cpuClock() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs fn (which performs b.N operations) and reports inv/s and
// cpu-µs/op.
func measure(b *testing.B, fn func()) {
	b.ReportAllocs()
	b.ResetTimer()
	c0, t0 := cpuClock(), time.Now()
	fn()
	wall, cpu := time.Since(t0), cpuClock()-c0
	b.StopTimer()
	b.ReportMetric(float64(b.N)/wall.Seconds(), "inv/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}

// split runs n callers sharing b.N operations, each calling op until its
// share is done.
func split(b *testing.B, n int, op func(caller int) error) {
	var wg sync.WaitGroup
	errc := make(chan error, n)
	for i := range n {
		k := b.N / n
		if i < b.N%n {
			k++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range k {
				if err := op(i); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		b.Fatal(err)
	}
}

// chpCaller is a plain newline client: one request line out, one response
// line in, so the client costs the same for every server.
type chpCaller struct {
	c  net.Conn
	br *bufio.Reader
}

func (c *chpCaller) call() error {
	if _, err := c.c.Write(chpRequest); err != nil {
		return err
	}
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return err
	}
	if !bytes.Contains(line, []byte(`"result":{"key":"k1"}`)) {
		return fmt.Errorf("unexpected response %s", line)
	}
	return nil
}

// BenchmarkCHPRPC: direct calls of kv.get over a Unix socket — one caller
// at a time (seq) and 64 callers on their own connections (callers64).
func BenchmarkCHPRPC(b *testing.B) {
	for _, callers := range []int{1, 64} {
		for _, kind := range chpStores {
			name := fmt.Sprintf("callers%d/%s", callers, kind)
			if callers == 1 {
				name = "seq/" + kind
			}
			b.Run(name, func(b *testing.B) { benchHandlerN(b, kvHandler(b, kind), callers) })
		}
	}
}

// benchHandlerN serves h as kv.get on a Unix socket and measures callers
// clients, each on its own connection, sharing b.N calls.
func benchHandlerN(b *testing.B, h jsonrpc.Handler, callers int) {
	sock := filepath.Join(b.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	srv := jsonrpc.NewServer(jsonrpc.Map{"kv.get": h}, &jsonrpc.ServerOptions{MaxConns: 256})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, ln); close(done) }()
	defer func() { cancel(); <-done }()
	cs := make([]*chpCaller, callers)
	for i := range cs {
		c, err := net.Dial("unix", sock)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		cs[i] = &chpCaller{c: c, br: bufio.NewReaderSize(c, 16<<10)}
		if err := cs[i].call(); err != nil { // warm up, and check the answer
			b.Fatal(err)
		}
	}
	measure(b, func() { split(b, callers, func(i int) error { return cs[i].call() }) })
}

// BenchmarkCHPInvoke: the pipeline in process, without a transport.
func BenchmarkCHPInvoke(b *testing.B) {
	for _, callers := range []int{1, 64} {
		for _, kind := range chpStores[1:] {
			b.Run(fmt.Sprintf("callers%d/%s", callers, kind), func(b *testing.B) {
				bd := governed(b, kind)
				ctx := context.Background()
				payload := json.RawMessage(`{"key":"k1"}`)
				measure(b, func() {
					split(b, callers, func(int) error {
						res, err := bd.Invoke(ctx, &chp.InvocationEnvelope{CapabilityID: "kv.get", Payload: payload})
						if err == nil && !res.Success {
							err = fmt.Errorf("outcome %s", res.Outcome)
						}
						return err
					})
				})
			})
		}
	}
}

// BenchmarkCHPHTTP: POST /invoke of the normative HTTP binding beside a bare
// net/http handler that echoes the same payload, 64 callers with keep-alive
// connections.
func BenchmarkCHPHTTP(b *testing.B) {
	body := `{"capability_id":"kv.get","payload":{"key":"k1"}}`
	for _, kind := range chpStores {
		b.Run("callers64/"+kind, func(b *testing.B) {
			var h http.Handler
			if kind == "bare" {
				h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					var env struct {
						Payload json.RawMessage `json:"payload"`
					}
					data, _ := io.ReadAll(r.Body)
					if err := json.Unmarshal(data, &env); err != nil {
						http.Error(w, err.Error(), http.StatusBadRequest)
						return
					}
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write(append(append([]byte(`{"data":`), env.Payload...), `,"success":true}`...))
				})
			} else {
				h = chphttp.Handler(governed(b, kind), nil)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
			defer hc.CloseIdleConnections()
			post := func(int) error {
				resp, err := hc.Post(srv.URL+"/invoke", "application/json", strings.NewReader(body))
				if err != nil {
					return err
				}
				data, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					return err
				}
				if resp.StatusCode != http.StatusOK || !bytes.Contains(data, []byte(`"success":true`)) {
					return fmt.Errorf("status %d: %s", resp.StatusCode, data)
				}
				return nil
			}
			// Warm up: every caller's keep-alive connection exists before the
			// clock starts.
			var wg sync.WaitGroup
			for i := range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 4 {
						if err := post(i); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			measure(b, func() { split(b, 64, post) })
		})
	}
}
