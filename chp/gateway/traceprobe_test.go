package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capmesh/capmesh/chp/gateway"
	"github.com/capmesh/capmesh/evidence"
)

// TestTraceparentOnlyOnTheInvocation: the caller's traceparent goes to
// the member request of its invocation (POST /invoke) only, not to the
// GET /host discovery probe that the invocation happened to trigger (a
// probe is the gateway's own business, not part of the caller's trace).
func TestTraceparentOnlyOnTheInvocation(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{} // path → Traceparent it carried
	member := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Method+" "+r.URL.Path] = r.Header.Get("Traceparent")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/host" {
			_, _ = w.Write([]byte(`{"id":"m","capabilities":[{"id":"probe.echo"}]}`))
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{}`))
	}))
	defer member.Close()
	gw, err := gateway.New(gateway.Config{HostID: "gw", Members: []string{member.URL}, Store: evidence.NewMemory(), Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req, err := http.NewRequest("POST", srv.URL+"/invoke", strings.NewReader(`{"capability_id":"probe.echo","correlation":{"correlation_id":"c-probe"}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Traceparent", tp)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	host, probed := seen["GET /host"]
	inv, invoked := seen["POST /invoke"]
	if !probed || !invoked {
		t.Fatalf("member saw %v, want a /host probe and the /invoke", seen)
	}
	if host != "" {
		t.Errorf("the /host discovery probe carried the caller's traceparent %q", host)
	}
	if inv != tp {
		t.Errorf("the member's /invoke carried traceparent %q, want %q", inv, tp)
	}
}
