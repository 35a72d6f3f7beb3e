package mcpbridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/mcpbridge"
)

type sumIn struct {
	A int `json:"a" jsonschema:"first addend"`
	B int `json:"b" jsonschema:"second addend"`
}

type sumOut struct {
	Sum int `json:"sum"`
}

// calculator is an MCP server made with the official Go SDK.
func calculator() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "example/calc", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "get-sum", Description: "adds two numbers"},
		func(_ context.Context, _ *mcp.CallToolRequest, in sumIn) (*mcp.CallToolResult, sumOut, error) {
			return nil, sumOut{in.A + in.B}, nil
		})
	return s
}

// ExampleWrap serves an MCP server's tools as a capmesh host: get-sum
// becomes calc.get_sum, governed by the host's CHP boundary. In a program the
// transport would be an mcp.CommandTransport running the server
// (`capmesh mcp wrap -- npx -y @modelcontextprotocol/server-everything`).
func ExampleWrap() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	clientEnd, serverEnd := mcp.NewInMemoryTransports()
	go calculator().Run(ctx, serverEnd)

	dir, _ := os.MkdirTemp("", "mcpwrap")
	defer os.RemoveAll(dir)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := mcpbridge.Wrap(ctx, clientEnd, &mcpbridge.WrapConfig{
		Host:   &host.Config{Socket: filepath.Join(dir, "calc.sock"), Ephemeral: true, NoAnnounce: true, Logger: quiet},
		Logger: quiet,
	})
	if err != nil {
		panic(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx) }()
	<-b.Host.Ready()

	for _, t := range b.Tools() {
		fmt.Printf("%s → %s, fingerprint of %d hex digits\n", t.Name, t.Method, len(t.Hash))
	}
	c := b.Host.LocalClient(ctx)
	var res mcp.CallToolResult
	if err := c.Call(ctx, "calc.get_sum", map[string]int{"a": 2, "b": 40}, &res); err != nil {
		panic(err)
	}
	out, _ := json.Marshal(res.StructuredContent)
	fmt.Println(string(out))
	err = c.Call(ctx, "calc.get_sum", map[string]any{"a": "two"}, nil)
	fmt.Println("invalid input refused:", err != nil)
	c.Close()

	stop()
	fmt.Println("stopped:", <-done)
	// Output:
	// get-sum → calc.get_sum, fingerprint of 64 hex digits
	// {"sum":42}
	// invalid input refused: true
	// stopped: <nil>
}

// ExampleNewServer exposes a capmesh host's capabilities as an MCP server
// and calls one with the official Go SDK's client. `capmesh mcp serve` does
// this for every trusted capability of the node, over stdio or streamable
// HTTP.
func ExampleNewServer() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	dir, _ := os.MkdirTemp("", "mcpserve")
	defer os.RemoveAll(dir)
	h, err := host.New(host.Info{Name: "calc", Version: "1.0.0", Domain: "calc"}, &host.Config{
		Socket: filepath.Join(dir, "calc.sock"), Ephemeral: true, NoAnnounce: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	_ = host.Register(h, "calc.add", func(_ context.Context, in sumIn) (sumOut, error) {
		return sumOut{in.A + in.B}, nil
	}, host.Description("adds two numbers"))
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx) }()
	<-h.Ready()

	up := mcpbridge.NewUpstream("unix", h.Addr("unix"))
	defer up.Close()
	caps, err := mcpbridge.HostCapabilities(ctx, up, "")
	if err != nil {
		panic(err)
	}
	clientEnd, serverEnd := mcp.NewInMemoryTransports()
	go mcpbridge.NewServer(caps, up, nil).Run(ctx, serverEnd)

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "example-client", Version: "1.0.0"}, nil).Connect(ctx, clientEnd, nil)
	if err != nil {
		panic(err)
	}
	tools, _ := cs.ListTools(ctx, nil)
	for _, t := range tools.Tools {
		fmt.Println("tool:", t.Name, "—", t.Description)
	}
	res, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "calc.add", Arguments: map[string]int{"a": 2, "b": 40}})
	out, _ := json.Marshal(res.StructuredContent)
	fmt.Println(string(out))
	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "calc.add", Arguments: map[string]any{"a": "two"}})
	fmt.Println("tool error:", res.IsError)
	cs.Close()
	stop()
	fmt.Println("stopped:", <-done)
	// Output:
	// tool: calc.add — adds two numbers
	// {"sum":42}
	// tool error: true
	// stopped: <nil>
}
