package registry_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry/api"

	"github.com/capmesh/capmesh/registry"
)

// clientFrom is an HTTP client whose connections come from the loopback
// address ip, so that one test can be several clients.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 30 * time.Second}
}

// post sends a body that is not JSON (so nothing is stored) and returns
// the status, Retry-After and error word.
func post(t *testing.T, c *http.Client, url string) (int, string, map[string]any) {
	t.Helper()
	resp, err := c.Post(url, "application/json", strings.NewReader("{"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	e, _ := out["error"].(map[string]any)
	return resp.StatusCode, resp.Header.Get("Retry-After"), e
}

// TestHTTPRateLimits: each client IP gets DefaultRatePerMinute writes a
// minute per group (POST /agents, /join, /admin/*), then 429
// rate_limit_exceeded with Retry-After; other clients and other groups
// are not affected, tokens come back with time, and the limits are
// configurable. Before, there was no limit at all.
func TestHTTPRateLimits(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	n := newNode(t, registry.Config{Now: now, SweepInterval: time.Hour})
	srv := httptest.NewServer(api.HTTPHandler(n))
	defer srv.Close()
	one, two := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")

	for _, path := range []string{"/agents", "/join", "/admin/invite"} {
		for i := 0; i < registry.DefaultRatePerMinute; i++ {
			if code, _, e := post(t, one, srv.URL+path); code == http.StatusTooManyRequests {
				t.Fatalf("%s: request %d of %d refused: %v", path, i+1, registry.DefaultRatePerMinute, e)
			}
		}
		code, retry, e := post(t, one, srv.URL+path)
		if code != http.StatusTooManyRequests || retry != "2" || e["code"] != registry.CodeWordRateLimited {
			t.Fatalf("%s over the limit: %d Retry-After %q %v, want 429, 2, %s", path, code, retry, e, registry.CodeWordRateLimited)
		}
		if d, _ := e["details"].(map[string]any); d["retry_after_seconds"] != float64(2) {
			t.Errorf("%s: details %v", path, e["details"])
		}
		if code, _, _ := post(t, two, srv.URL+path); code == http.StatusTooManyRequests {
			t.Fatalf("%s: another client was limited too", path)
		}
	}
	// Reads are not limited.
	for i := 0; i < 40; i++ {
		if resp, err := one.Get(srv.URL + "/agents"); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /agents: %v %v", err, resp)
		} else {
			resp.Body.Close()
		}
	}
	// 30 a minute: one token every 2 s.
	clock.Add(int64(2 * time.Second))
	if code, _, _ := post(t, one, srv.URL+"/agents"); code == http.StatusTooManyRequests {
		t.Fatal("no token back after 2 s")
	}
	if code, _, _ := post(t, one, srv.URL+"/agents"); code != http.StatusTooManyRequests {
		t.Fatalf("a second token after 2 s: %d", code)
	}

	// Configured: 6 a minute with a burst of 2; off for admin.
	n2 := newNode(t, registry.Config{Now: now, SweepInterval: time.Hour, RateLimits: registry.RateLimits{
		Agents: registry.RateLimit{PerMinute: 6, Burst: 2}, Admin: registry.RateLimit{PerMinute: -1}}})
	srv2 := httptest.NewServer(api.HTTPHandler(n2))
	defer srv2.Close()
	post(t, one, srv2.URL+"/agents")
	post(t, one, srv2.URL+"/agents")
	if code, retry, _ := post(t, one, srv2.URL+"/agents"); code != http.StatusTooManyRequests || retry != "10" {
		t.Fatalf("configured limit: %d Retry-After %q, want 429 10", code, retry)
	}
	for i := 0; i < 2*registry.DefaultRatePerMinute; i++ {
		if code, _, _ := post(t, one, srv2.URL+"/admin/invite"); code == http.StatusTooManyRequests {
			t.Fatal("a disabled limit refused")
		}
	}
}

// TestHTTPRateLimitClientTableBounded: the node remembers at most
// MaxClients clients per group; while none can be forgotten, new clients
// share one bucket, so a flood of addresses costs bounded memory and is
// itself limited.
func TestHTTPRateLimitClientTableBounded(t *testing.T) {
	n := newNode(t, registry.Config{SweepInterval: time.Hour, RateLimits: registry.RateLimits{
		Agents: registry.RateLimit{PerMinute: 1, Burst: 1}, MaxClients: 1}})
	srv := httptest.NewServer(api.HTTPHandler(n))
	defer srv.Close()
	for i, tc := range []struct {
		ip      string
		limited bool
	}{
		{"127.0.0.1", false}, // remembered: the table is full
		{"127.0.0.1", true},  // its own bucket is empty
		{"127.0.0.2", false}, // new: the shared bucket
		{"127.0.0.3", true},  // new: the shared bucket is empty
	} {
		if code, _, _ := post(t, clientFrom(tc.ip), srv.URL+"/agents"); (code == http.StatusTooManyRequests) != tc.limited {
			t.Errorf("request %d from %s: %d, limited want %v", i, tc.ip, code, tc.limited)
		}
	}
}
