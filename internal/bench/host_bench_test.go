package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/wire"
)

// startHost serves a host with n capabilities (echo.op0 … in ten domains,
// each with a cost estimate, every second one with a prerequisite) on a
// Unix socket, in memory.
func startHost(b *testing.B, n int) (addr string, stop func()) {
	b.Helper()
	sock := filepath.Join(b.TempDir(), "bench.sock")
	h, err := host.New(host.Info{Name: "bench", Version: "1.0.0", Domain: "d0"}, &host.Config{
		Socket: sock, Ephemeral: true, NoAnnounce: true, NoDomainLink: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	type in struct {
		Key string `json:"key"`
	}
	for i := range n {
		name := fmt.Sprintf("d%d.operation_%03d", i%10, i)
		opts := []host.CapOption{host.Cost(wire.CostEstimate{CPU: wire.CostLow, LatencyMS: 1})}
		if i%2 == 1 {
			opts = append(opts, host.Requires(fmt.Sprintf("d%d.operation_%03d", (i-1)%10, i-1)))
		}
		if err := host.Register(h, name, func(_ context.Context, v in) (string, error) { return v.Key, nil }, opts...); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx) }()
	<-h.Ready()
	return sock, func() { cancel(); <-done }
}

// BenchmarkHostCapabilitiesList compares, on one host with 200
// capabilities and over the same Unix socket connection type, a
// capabilities.list round trip (the full signed Level 3 envelope, ~20 KB)
// with a health.liveness round trip (the floor: the cheapest call a host
// answers). The target is list ≤ 1.5× liveness; the envelope is
// encoded and signed once per registration change, so a call only copies
// bytes. b.SetBytes reports the response size.
func BenchmarkHostCapabilitiesList(b *testing.B) {
	addr, stop := startHost(b, 200)
	defer stop()
	for _, bc := range []struct{ name, method string }{
		{"health.liveness", "health.liveness"},
		{"capabilities.list", "capabilities.list"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := net.Dial("unix", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			req := []byte(`{"jsonrpc":"2.0","method":"` + bc.method + `","id":1}` + "\n")
			br := bufio.NewReaderSize(c, 256<<10)
			rt := func() int {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				line, err := br.ReadSlice('\n')
				if err != nil {
					b.Fatal(err)
				}
				return len(line)
			}
			b.SetBytes(int64(rt()))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				rt()
			}
		})
	}
}

// BenchmarkHostCapabilityCall measures a direct capability call (params
// validated, CHP boundary, evidence appended to the in-memory store)
// beside health.liveness on the same host: the price of the boundary.
func BenchmarkHostCapabilityCall(b *testing.B) {
	addr, stop := startHost(b, 10)
	defer stop()
	for _, bc := range []struct{ name, req string }{
		{"health.liveness", `{"jsonrpc":"2.0","method":"health.liveness","id":1}`},
		{"d0.operation_000", `{"jsonrpc":"2.0","method":"d0.operation_000","params":{"key":"k"},"id":1}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := net.Dial("unix", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			req := []byte(bc.req + "\n")
			br := bufio.NewReaderSize(c, 64<<10)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				if _, err := br.ReadSlice('\n'); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHostCapabilitiesListRatio alternates the two round trips of
// BenchmarkHostCapabilitiesList on one connection, so that both see the
// same load on a shared machine, and reports each one's mean time and
// their ratio (list-x: capabilities.list time / health.liveness time).
func BenchmarkHostCapabilitiesListRatio(b *testing.B) {
	addr, stop := startHost(b, 200)
	defer stop()
	c, err := net.Dial("unix", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReaderSize(c, 256<<10)
	live := []byte(`{"jsonrpc":"2.0","method":"health.liveness","id":1}` + "\n")
	list := []byte(`{"jsonrpc":"2.0","method":"capabilities.list","id":2}` + "\n")
	rt := func(req []byte) time.Duration {
		start := time.Now()
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := br.ReadSlice('\n'); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	rt(live)
	rt(list)
	var tl, tc time.Duration
	b.ResetTimer()
	for range b.N {
		tl += rt(live)
		tc += rt(list)
	}
	b.ReportMetric(float64(tl.Nanoseconds())/float64(b.N), "liveness-ns")
	b.ReportMetric(float64(tc.Nanoseconds())/float64(b.N), "list-ns")
	b.ReportMetric(float64(tc)/float64(tl), "list-x")
}
