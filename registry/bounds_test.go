package registry_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry/api"

	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
)

// TestEnrollValidityBounds: registry.enroll and registry.invite take hour
// counts in [1, bound]; anything else is -32602 naming the bound. Before,
// 5124096 hours wrapped into a 25-minute certificate and -5 silently
// became 7 days.
func TestEnrollValidityBounds(t *testing.T) {
	n := newNode(t, registry.Config{})
	l, sock := unixListener(t, "node")
	serve(t, api.RPC(n), l)
	c := dialUnix(t, sock)
	_, priv, _ := ed25519.GenerateKey(nil)
	key := base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))

	for _, h := range []int64{5124096, -5, 0, registry.MaxValidityHours + 1, 1 << 62} {
		err := c.Call(context.Background(), "registry.enroll", map[string]any{"node_public_key": key, "validity_hours": h}, nil)
		var je *jsonrpc.Error
		if code, _ := rpcCode(err); code != jsonrpc.InvalidParams || !asJSONRPC(err, &je) || !strings.Contains(je.Message, "87600") {
			t.Errorf("validity_hours %d: got %v, want -32602 naming the bound 87600", h, err)
		}
	}
	for _, p := range []map[string]any{{"max_validity_hours": 5124096}, {"max_validity_hours": -1}, {"token_expiry_hours": 1 << 40}, {"token_expiry_hours": 0}} {
		if code, _ := rpcCode(c.Call(context.Background(), "registry.invite", p, nil)); code != jsonrpc.InvalidParams {
			t.Errorf("registry.invite %v: code %v, want -32602", p, code)
		}
	}
	// The HTTP surface names the same bounds.
	srv := httptest.NewServer(api.HTTPHandler(n))
	defer srv.Close()
	for _, tc := range []struct{ path, body, bound string }{
		{"/join", `{"node_public_key":"k","invite_token":"t","validity_hours":5124096}`, "87600"},
		{"/renew", `{"cert_id":"c","node_public_key":"k","validity_hours":-5}`, "87600"},
	} {
		resp, err := http.Post(srv.URL+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Error struct{ Message string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(out.Error.Message, tc.bound) {
			t.Errorf("POST %s %s: %d %q, want 400 naming %s", tc.path, tc.body, resp.StatusCode, out.Error.Message, tc.bound)
		}
	}
	if _, err := n.Enroll(context.Background(), key, nil, -time.Hour); err == nil {
		t.Error("Enroll with a negative validity succeeded")
	}

	// In range: the certificate lasts exactly what was asked; absent is 7 days.
	for _, tc := range []struct {
		params map[string]any
		want   time.Duration
	}{
		{map[string]any{"node_public_key": key, "validity_hours": registry.MaxValidityHours}, registry.MaxValidityHours * time.Hour},
		{map[string]any{"node_public_key": key, "validity_hours": 24}, 24 * time.Hour},
		{map[string]any{"node_public_key": key}, 168 * time.Hour},
	} {
		cert := call(t, c, "registry.enroll", tc.params)
		iss, err1 := time.Parse(time.RFC3339Nano, cert["issued_at"].(string))
		exp, err2 := time.Parse(time.RFC3339Nano, cert["expires_at"].(string))
		if err1 != nil || err2 != nil {
			t.Fatalf("certificate times: %v %v (%v)", err1, err2, cert)
		}
		if got := exp.Sub(iss); got != tc.want {
			t.Errorf("%v: certificate lasts %s, want %s", tc.params, got, tc.want)
		}
	}
}

func asJSONRPC(err error, out **jsonrpc.Error) bool { return errors.As(err, out) }
