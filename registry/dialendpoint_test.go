package registry

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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

// TestDialEndpointNeverFollowsRedirect: a routed call over the HTTP bridge
// that the provider answers with a redirect fails with the redirect's
// status; the call is never re-sent to the address the provider names
// (which could be a service only the router's machine reaches).
func TestDialEndpointNeverFollowsRedirect(t *testing.T) {
	var hits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":"redirected"}`))
	}))
	defer target.Close()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/jsonrpc", code)
		}))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		c, err := DialEndpoint(ctx, provider.URL)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = c.Call(ctx, "ping", nil, &got)
		c.Close()
		cancel()
		provider.Close()
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("HTTP %d", code)) {
			t.Errorf("%d: call answered %q, %v; want the redirect's status as the error", code, got, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the redirect's target was called %d time(s)", n)
	}
}
