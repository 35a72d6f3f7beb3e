package registry_test

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry/api"

	"github.com/capmesh/capmesh/registry"
)

// FuzzHTTPBodies sends arbitrary bodies to every write route of the
// Genesis-Mesh HTTP binding: the answer is never a 5xx, always a JSON
// object, and an error always has the reference's shape with a code.
func FuzzHTTPBodies(f *testing.F) {
	routes := []struct{ method, path string }{
		{"POST", "/agents"}, {"POST", "/join"}, {"POST", "/renew"}, {"POST", "/heartbeat"},
		{"POST", "/admin/invite"}, {"POST", "/admin/revoke"},
		{"DELETE", "/agents/frFHgD2h7pTJ9c9dXqcWfOa5Lvx1u9afoo3EvneqeBA="},
	}
	for i := range routes {
		for _, b := range []string{``, `{}`, `[]`, `null`, `{"node_public_key":"frFHgD2h7pTJ9c9dXqcWfOa5Lvx1u9afoo3EvneqeBA=","invite_token":"x","timestamp":"2026-07-01T12:00:00Z","nonce":"n","signature":"AA=="}`,
			`{"agent_id":"a","node_public_key":"frFHgD2h7pTJ9c9dXqcWfOa5Lvx1u9afoo3EvneqeBA=","network_name":"N","endpoint":{"host":"h","port":1},"registered_at":"2026-07-01T12:00:00","expires_at":"2026-07-01T13:00:00Z","signatures":[{"key_id":"k","sig":"AA=="}]}`,
			`{"version":"v1","signed_at":"2026-07-01T12:00:00+00:00","signature":"` + string(bytes.Repeat([]byte("A"), 86)) + `=="}`,
			`{"validity_hours":1e400,"cert_id":"x","node_public_key":"\ud800"}`} {
			f.Add(uint8(i), []byte(b))
		}
	}
	off := registry.RateLimit{PerMinute: -1} // every input reaches its handler
	n, err := registry.NewNode(registry.Config{Network: "N", SweepInterval: time.Hour, Logger: quiet,
		RateLimits: registry.RateLimits{Agents: off, Join: off, Admin: off}})
	if err != nil {
		f.Fatal(err)
	}
	defer n.Close()
	h := api.HTTPHandler(n)
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		r := routes[int(route)%len(routes)]
		req := httptest.NewRequest(r.method, r.path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %s: %d %s\nbody: %q", r.method, r.path, w.Code, w.Body.Bytes(), body)
		}
		var out map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s %s: answer is not a JSON object: %v: %q", r.method, r.path, err, w.Body.Bytes())
		}
		if w.Code >= 300 {
			e, _ := out["error"].(map[string]any)
			if code, _ := e["code"].(string); code == "" || e["message"] == nil || e["request_id"] == nil {
				t.Fatalf("%s %s: %d without the reference error shape: %s", r.method, r.path, w.Code, w.Body.Bytes())
			}
		}
	})
}
