package registry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/jsonrpc/jhttp"
)

// TestDialEndpointHTTPDefaultPath: a registration's http endpoint without
// a path is dialed at /jsonrpc, where capmesh serves its JSON-RPC bridge
// (endpoint.Normalize), not at /, which is the CHP HTTP binding.
func TestDialEndpointHTTPDefaultPath(t *testing.T) {
	srv := jsonrpc.NewServer(jsonrpc.Map{"ping": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return "pong", nil
	})}, nil)
	mux := http.NewServeMux()
	mux.Handle("/jsonrpc", jhttp.Handler(srv))
	mux.Handle("/", http.NotFoundHandler())
	ts := httptest.NewServer(mux)
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := DialEndpoint(ctx, ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got string
	if err := c.Call(ctx, "ping", nil, &got); err != nil || got != "pong" {
		t.Fatalf("ping over %s: %q, %v", ts.URL, got, err)
	}
}
