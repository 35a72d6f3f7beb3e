package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/jsonrpc"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testCtx is a generous deadline that only matters when something hangs.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// shortDir is a temporary directory with a path short enough for a Unix
// socket.
func shortDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "mcpb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

type addIn struct {
	A int `json:"a" jsonschema:"first addend"`
	B int `json:"b" jsonschema:"second addend"`
}

type addOut struct {
	Sum int `json:"sum"`
}

// testServer is an MCP server made with the go-sdk: get-sum adds, fail
// always fails as a tool error, slowCount sends one progress notification
// per step and echoes the correlation id it was given. desc is get-sum's
// description, so a test can change the tool's definition.
func testServer(desc string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test-servers/calc", Version: "1.2.3"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "get-sum", Description: desc, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	destructive := true
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "always fails", Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive}},
		func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("this tool always fails")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slowCount", Description: "counts, reporting progress"},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Steps int `json:"steps"`
		}) (*mcp.CallToolResult, any, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				for i := 1; i <= in.Steps; i++ {
					if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
						ProgressToken: tok, Progress: float64(i), Total: float64(in.Steps), Message: fmt.Sprintf("step %d", i)}); err != nil {
						return nil, nil, err
					}
				}
			}
			corr, _ := req.Params.Meta[MetaCorrelationID].(string)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "correlation " + corr}}}, nil, nil
		})
	return s
}

// startServer runs s on an in-memory transport and returns the client end.
func startServer(t testing.TB, s *mcp.Server) mcp.Transport {
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(testCtx(t), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	return ct
}

// serveBridge wraps the server at tr as a host on a Unix socket and serves
// it until the test ends.
func serveBridge(t testing.TB, tr mcp.Transport, cfg *WrapConfig) *Bridge {
	t.Helper()
	if cfg == nil {
		cfg = &WrapConfig{}
	}
	cfg.Logger = quietLogger()
	if cfg.Host == nil {
		cfg.Host = &host.Config{}
	}
	cfg.Host.Socket = filepath.Join(shortDir(t), "b.sock")
	cfg.Host.Ephemeral = cfg.Host.DataDir == "" // a test that gives a data dir wants durable evidence
	cfg.Host.NoAnnounce, cfg.Host.Logger = true, quietLogger()
	b, err := Wrap(testCtx(t), tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	select {
	case <-b.Host.Ready():
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	return b
}

// dial connects to a host's socket; notifications go to notes.
func dial(t testing.TB, addr string, notes chan<- json.RawMessage) *jsonrpc.Client {
	t.Helper()
	var opts *jsonrpc.ClientOptions
	if notes != nil {
		opts = &jsonrpc.ClientOptions{OnNotify: func(method string, params json.RawMessage) {
			if method == NotifyProgress {
				notes <- append(json.RawMessage(nil), params...)
			}
		}}
	}
	c, err := jsonrpc.Dial(testCtx(t), "unix", addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
