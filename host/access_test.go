package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/chphttp"
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/jsonrpc"
)

// postRPC posts one JSON-RPC request to url with key as X-CHP-Key (none
// when empty) and returns the HTTP status and the decoded response.
func postRPC(t *testing.T, url, key, method string, params any) (int, jsonrpcReply) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	must(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("X-CHP-Key", key)
	}
	res, err := http.DefaultClient.Do(req)
	must(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	must(t, err)
	var r jsonrpcReply
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s %s: HTTP %d, not JSON-RPC: %s", method, url, res.StatusCode, b)
	}
	return res.StatusCode, r
}

type jsonrpcReply struct {
	Result json.RawMessage `json:"result"`
	Error  *jsonrpc.Error  `json:"error"`
}

func (r jsonrpcReply) code() jsonrpc.Code {
	if r.Error == nil {
		return 0
	}
	return r.Error.Code
}

// TestKeyedHTTPGuardsJSONRPC pins issue 14 point 1: a host with an API
// key answered 401 on the CHP routes but served every capability and
// chp.* method on POST /jsonrpc of the same listener with no key or a
// wrong one. Now a missing key is an anonymous caller (refused -32001
// for everything but discovery), a wrong key is 401 before dispatch, and
// the key lets the call through — as on the CHP routes.
func TestKeyedHTTPGuardsJSONRPC(t *testing.T) {
	cfg := socketConfig(t)
	cfg.HTTP = "127.0.0.1:0"
	cfg.CHPHTTP = &chphttp.Options{SharedKeys: []string{"good-key"}}
	h := newKVHost(t, cfg)
	serve(t, h)
	url := "http://" + h.Addr("http") + "/jsonrpc"

	// A correlation to read back, made by the host's own user.
	c := dialUnix(t, h.Addr("unix"))
	must(t, c.Call(context.Background(), "kv.put", map[string]any{"key": "a", "value": "1", "_meta": map[string]any{"correlation_id": "corr-keyed"}}, nil))

	calls := []struct {
		method string
		params any
	}{
		{"kv.get", map[string]any{"key": "a"}},
		{"chp.invoke", map[string]any{"capability_id": "kv.get", "payload": map[string]any{"key": "a"}}},
		{"chp.describe", map[string]any{}},
		{"chp.replay", map[string]any{"correlation_id": "corr-keyed"}},
		{"chp.verify", map[string]any{"correlation_id": "corr-keyed"}},
		{"chp.export", map[string]any{"correlation_id": "corr-keyed"}},
	}
	for _, call := range calls {
		if st, r := postRPC(t, url, "", call.method, call.params); st != http.StatusOK || r.code() != -32001 {
			t.Errorf("%s without a key: HTTP %d, code %d (%v); want 200 with -32001", call.method, st, r.code(), r.Error)
		}
		if st, r := postRPC(t, url, "wrong-key", call.method, call.params); st != http.StatusUnauthorized || r.code() != -32001 {
			t.Errorf("%s with a wrong key: HTTP %d, code %d; want 401 with -32001", call.method, st, r.code())
		}
		if st, r := postRPC(t, url, "good-key", call.method, call.params); st != http.StatusOK || r.Error != nil {
			t.Errorf("%s with the key: HTTP %d, error %v; want a result", call.method, st, r.Error)
		}
	}
	// Discovery stays public, as the CHP binding's /health is.
	if st, r := postRPC(t, url, "", "identity.get", nil); st != http.StatusOK || r.Error != nil {
		t.Errorf("identity.get without a key: HTTP %d, error %v", st, r.Error)
	}
	// The CHP routes keep the binding's behaviour: 401 without the key.
	res, err := http.Post("http://"+h.Addr("http")+"/invoke", "application/json", strings.NewReader(`{"capability_id":"kv.get","payload":{"key":"a"}}`))
	must(t, err)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /invoke without a key: HTTP %d, want 401", res.StatusCode)
	}
}

// TestKeylessHostRefusesNonLoopback pins issue 14 point 10: a host without
// keys used to bind TCP or HTTP on every interface without a word. Now it
// refuses to start, naming the way out, unless InsecureListen is set.
func TestKeylessHostRefusesNonLoopback(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*host.Config)
	}{
		{"tcp", func(c *host.Config) { c.TCP = "0.0.0.0:0" }},
		{"http", func(c *host.Config) { c.HTTP = ":0" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := socketConfig(t)
			tc.set(cfg)
			h := newKVHost(t, cfg)
			// A host that (wrongly) serves stops when ctx ends: the test
			// then fails instead of hanging.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := h.Serve(ctx)
			if err == nil || !strings.Contains(err.Error(), "refusing to serve "+tc.name) || !strings.Contains(err.Error(), "InsecureListen") {
				t.Fatalf("Serve = %v, want a refusal naming InsecureListen", err)
			}

			cfg = socketConfig(t)
			tc.set(cfg)
			cfg.InsecureListen = true
			serve(t, newKVHost(t, cfg))

			cfg = socketConfig(t)
			tc.set(cfg)
			cfg.CHPHTTP = &chphttp.Options{SharedKeys: []string{"k"}}
			serve(t, newKVHost(t, cfg))
		})
	}
}

// TestClaimedSubjectIsRecordedUnverified pins issue 14 point 2's forgery:
// a subject the caller asserts, {"id":"admin","verified":true}, was
// written into evidence as given. A caller that no binding authenticated
// is recorded with verified false; an authenticated one (the Unix peer)
// replaces the subject with its own.
func TestClaimedSubjectIsRecordedUnverified(t *testing.T) {
	cfg := socketConfig(t)
	cfg.HTTP = "127.0.0.1:0"
	h := newKVHost(t, cfg)
	serve(t, h)
	env := func(corr string) map[string]any {
		return map[string]any{"capability_id": "kv.get", "payload": map[string]any{"key": "a"},
			"correlation": map[string]any{"correlation_id": corr}, "subject": map[string]any{"id": "admin", "verified": true}}
	}
	// Anonymous over HTTP: the claim is kept, marked unverified.
	if st, r := postRPC(t, "http://"+h.Addr("http")+"/jsonrpc", "", "chp.invoke", env("corr-claim")); st != 200 || r.Error != nil {
		t.Fatalf("chp.invoke: HTTP %d, %v", st, r.Error)
	}
	if got := subjectOf(t, h, "corr-claim"); got != `{"id":"admin","verified":false}` {
		t.Errorf("claimed subject recorded as %s", got)
	}
	// The same claim over the Unix socket: the kernel's uid wins.
	c := dialUnix(t, h.Addr("unix"))
	must(t, c.Call(context.Background(), "chp.invoke", env("corr-peer"), nil))
	if got := subjectOf(t, h, "corr-peer"); !strings.Contains(got, `"type":"unix_peer"`) || !strings.Contains(got, `"verified":true`) || strings.Contains(got, "admin") {
		t.Errorf("Unix peer's subject recorded as %s", got)
	}
}

// subjectOf returns the subject of the first evidence event of corr,
// compacted.
func subjectOf(t *testing.T, h *host.Host, corr string) string {
	t.Helper()
	rr, err := h.Boundary().Replay(context.Background(), chp.ReplayQuery{CorrelationID: corr})
	must(t, err)
	if len(rr.Events) == 0 {
		t.Fatalf("no evidence for %s", corr)
	}
	var ev struct {
		Subject json.RawMessage `json:"subject"`
	}
	must(t, json.Unmarshal(rr.Events[0], &ev))
	var b bytes.Buffer
	must(t, json.Compact(&b, ev.Subject))
	return b.String()
}
