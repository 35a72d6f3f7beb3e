package mcpbridge

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStreamableHTTPBothWays: an MCP server on streamable HTTP is wrapped
// (mcp wrap --url), and the wrapped host's capabilities are served again on
// streamable HTTP (mcp serve --http) to a go-sdk client.
func TestStreamableHTTPBothWays(t *testing.T) {
	ctx := testCtx(t)
	upstream := testServer("adds")
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return upstream }, nil))
	t.Cleanup(hs.Close)
	b := serveBridge(t, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1}, nil)

	up := NewUpstream("unix", b.Host.Addr("unix"))
	t.Cleanup(func() { up.Close() })
	caps, err := HostCapabilities(ctx, up, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(caps, up, nil)
	front := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(front.Close)

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-client", Version: "1.0.0"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: front.URL, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "calc.get_sum", Arguments: map[string]any{"a": 20, "b": 22}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if string(sc) != `{"sum":42}` {
		t.Errorf("structured content %s", sc)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "calc.get_sum", Arguments: map[string]any{"a": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if ec := errorContent(t, res); len(ec.EvidenceIDs) == 0 {
		t.Errorf("invalid input over HTTP: %+v", ec)
	}
}
