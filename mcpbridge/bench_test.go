package mcpbridge

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/internal/interleave"
)

// serverEnv makes the test binary run testServer on stdio instead of the
// tests: the stdio benchmarks' MCP server process.
const serverEnv = "MCPBRIDGE_TEST_STDIO_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) == "1" {
		if err := testServer("adds two numbers").Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// stdioServer runs testServer in a child process on stdio.
func stdioServer(t testing.TB) mcp.Transport {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(exe)
	c.Env = append(os.Environ(), serverEnv+"=1")
	return &mcp.CommandTransport{Command: c}
}

// bareClient connects a go-sdk client straight to the server at tr.
func bareClient(b testing.TB, tr mcp.Transport) *mcp.ClientSession {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1.0.0"}, nil).Connect(testCtx(b), tr, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

// BenchmarkBridgeRatio measures a tools/call of get-sum three ways in one
// run, alternated in blocks (internal/interleave): bare (a go-sdk client
// straight to the server), wrapped (a capmesh client on the host's Unix
// socket: CHP boundary, evidence in memory, then the bridge's go-sdk client
// to the server) and serve (a go-sdk client to NewServer, in memory, which
// calls a native capmesh host's calc.get_sum on its Unix socket: what an MCP
// client of `capmesh mcp serve` pays). The MCP server is the same go-sdk
// server, in memory or a child process on stdio.
func BenchmarkBridgeRatio(b *testing.B) {
	for _, tc := range []struct {
		name   string
		server func(testing.TB) mcp.Transport
	}{
		{"inmemory", func(t testing.TB) mcp.Transport { return startServer(t, testServer("adds two numbers")) }},
		{"stdio", stdioServer},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			bare := bareClient(b, tc.server(b))
			br := serveBridge(b, tc.server(b), nil)
			c := dial(b, br.Host.Addr("unix"), nil)
			native := calcHost(b)
			up := NewUpstream("unix", native.Addr("unix"))
			b.Cleanup(func() { up.Close() })
			caps, err := HostCapabilities(ctx, up, "")
			if err != nil {
				b.Fatal(err)
			}
			viaServe := bareClient(b, startServer(b, NewServer(caps, up, nil)))
			args := map[string]any{"a": 1, "b": 2}
			callBare := func() {
				if r, err := bare.CallTool(ctx, &mcp.CallToolParams{Name: "get-sum", Arguments: args}); err != nil || r.IsError {
					b.Fatal(err, r)
				}
			}
			callWrapped := func() {
				if err := c.Call(ctx, "calc.get_sum", args, nil); err != nil {
					b.Fatal(err)
				}
			}
			callServe := func() {
				if r, err := viaServe.CallTool(ctx, &mcp.CallToolParams{Name: "calc.get_sum", Arguments: args}); err != nil || r.IsError {
					b.Fatal(err, r)
				}
			}
			b.Run("wrapped", func(b *testing.B) {
				f, c := interleave.Medians(b, callBare, callWrapped)
				b.ReportMetric(f/1e3, "bare-µs")
				b.ReportMetric(c/1e3, "governed-µs")
				b.ReportMetric(c/f, "x-bare")
			})
			durable := serveBridge(b, tc.server(b), &WrapConfig{Host: &host.Config{DataDir: shortDir(b)}})
			dc := dial(b, durable.Host.Addr("unix"), nil)
			b.Run("wrapped-durable", func(b *testing.B) {
				f, c := interleave.Medians(b, callBare, func() {
					if err := dc.Call(ctx, "calc.get_sum", args, nil); err != nil {
						b.Fatal(err)
					}
				})
				b.ReportMetric(f/1e3, "bare-µs")
				b.ReportMetric(c/1e3, "governed-µs")
				b.ReportMetric(c/f, "x-bare")
			})
			if tc.name != "inmemory" {
				return // serve's own MCP leg is in memory: compare it with the in-memory bare call only
			}
			b.Run("serve", func(b *testing.B) {
				f, c := interleave.Medians(b, callBare, callServe)
				b.ReportMetric(f/1e3, "bare-µs")
				b.ReportMetric(c/1e3, "governed-µs")
				b.ReportMetric(c/f, "x-bare")
			})
		})
	}
}

// calcHost serves calc.get_sum natively (CHP boundary, evidence in memory).
func calcHost(t testing.TB) *host.Host {
	t.Helper()
	h, err := host.New(host.Info{Name: "calc", Version: "1.0.0", Domain: "calc"}, &host.Config{
		Socket: filepath.Join(shortDir(t), "c.sock"), Ephemeral: true, NoAnnounce: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Register(h, "calc.get_sum", func(_ context.Context, in addIn) (addOut, error) {
		return addOut{Sum: in.A + in.B}, nil
	}, host.Description("adds two numbers")); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	<-h.Ready()
	return h
}
