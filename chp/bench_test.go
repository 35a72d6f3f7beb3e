package chp

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/logstore"
	"github.com/capmesh/capmesh/jsonrpc"
)

// Benchmarks of the governed invocation path. Run them side by side with the
// floor (a bare handler behind the same transport):
//
//	go test ./chp/ -run '^$' -bench . -benchtime 2s -count 5
//
// figures in docs/BENCHMARKS.md.

func benchEcho(_ context.Context, p json.RawMessage) (json.RawMessage, error) { return p, nil }

func benchBoundary(b *testing.B, durable bool) *Boundary {
	var store evidence.Store = evidence.NewMemory()
	if durable {
		ls, err := logstore.Open(filepath.Join(b.TempDir(), "ev"), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { ls.Close() })
		store = ls
	}
	bd, err := NewBoundary(Config{HostID: "bench", Store: store})
	if err != nil {
		b.Fatal(err)
	}
	if err := bd.Register(Capability{Descriptor: CapabilityDescriptor{ID: "kv.get", Version: "1.0.0", Description: "bench"}, Handler: benchEcho}); err != nil {
		b.Fatal(err)
	}
	return bd
}

var benchPayload = json.RawMessage(`{"key":"k1"}`)

func BenchmarkInvoke(b *testing.B) {
	for _, durable := range []bool{false, true} {
		name := "memory"
		if durable {
			name = "logstore"
		}
		b.Run(name+"/sequential", func(b *testing.B) {
			bd := benchBoundary(b, durable)
			ctx := context.Background()
			for b.Loop() {
				if _, err := bd.Invoke(ctx, &InvocationEnvelope{CapabilityID: "kv.get", Payload: benchPayload}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/64callers", func(b *testing.B) {
			bd := benchBoundary(b, durable)
			ctx := context.Background()
			b.SetParallelism(32) // 32 × GOMAXPROCS(2) = 64 callers
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := bd.Invoke(ctx, &InvocationEnvelope{CapabilityID: "kv.get", Payload: benchPayload}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// rpcPair serves m on a Unix socket and returns a connected client.
func rpcPair(b *testing.B, m jsonrpc.Map) *jsonrpc.Client {
	sock := filepath.Join(b.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	srv := jsonrpc.NewServer(m, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go srv.Serve(ctx, ln)
	conn, err := net.Dial("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	cl := jsonrpc.NewClient(conn, nil)
	b.Cleanup(func() { cl.Close(); cancel(); srv.Shutdown(context.Background()) })
	return cl
}

func BenchmarkRPC(b *testing.B) {
	bare := jsonrpc.HandlerFunc(func(ctx context.Context, r *jsonrpc.Request) (any, error) { return benchEcho(ctx, r.Params) })
	for _, c := range []struct {
		name    string
		durable bool
		gov     bool
	}{{"bare", false, false}, {"governed-memory", false, true}, {"governed-logstore", true, true}} {
		b.Run(c.name+"/64callers", func(b *testing.B) {
			m := jsonrpc.Map{"kv.get": bare}
			if c.gov {
				m["kv.get"] = benchBoundary(b, c.durable).DirectHandler()
			}
			cl := rpcPair(b, m)
			ctx := context.Background()
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				var out json.RawMessage
				for pb.Next() {
					if err := cl.Call(ctx, "kv.get", map[string]string{"key": "k1"}, &out); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func BenchmarkHTTPInvoke(b *testing.B) {
	for _, durable := range []bool{false, true} {
		name := "memory"
		if durable {
			name = "logstore"
		}
		b.Run(name+"/64callers", func(b *testing.B) {
			srv := httptest.NewServer(benchBoundary(b, durable).HTTPHandler(nil))
			defer srv.Close()
			tr := &http.Transport{MaxIdleConnsPerHost: 128}
			hc := &http.Client{Transport: tr}
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := hc.Post(srv.URL+"/invoke", "application/json", strings.NewReader(`{"capability_id":"kv.get","payload":{"key":"k1"}}`))
					if err != nil {
						b.Error(err)
						return
					}
					var res InvocationResult
					err = json.NewDecoder(resp.Body).Decode(&res)
					resp.Body.Close()
					if err != nil || !res.Success {
						b.Errorf("invoke: %v %+v", err, res)
						return
					}
				}
			})
		})
	}
}
