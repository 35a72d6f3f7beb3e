package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/node"
)

// TestCHPGatewayOnTheNodeHTTPListener: a node started with CHPGateway
// serves the gateway's routes on its HTTP listener, in front of a member
// node (here one hosting the CHP fixtures): the merged /host names the
// member as owner and /invoke reaches it; /health stays the node's own.
func TestCHPGatewayOnTheNodeHTTPListener(t *testing.T) {
	env(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	member, err := node.Start(ctx, node.Config{Name: "member", Memory: true, NoSocket: true, HTTP: "127.0.0.1:0", CHPFixtures: true})
	if err != nil {
		t.Fatal(err)
	}
	defer member.Stop(ctx)
	gw, err := node.Start(ctx, node.Config{Name: "gw", Memory: true, NoSocket: true, HTTP: "127.0.0.1:0",
		CHPGateway: []string{"http://" + member.Addr("http")}})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Stop(ctx)
	base := "http://" + gw.Addr("http")

	get := func(path string) map[string]any {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	host := get("/host")
	if host["id"] != "gw-gateway" || host["kind"] != "gateway" {
		t.Fatalf("/host is not the gateway's: %v", host["id"])
	}
	owned := false
	for _, c := range host["capabilities"].([]any) {
		c := c.(map[string]any)
		if c["id"] == "conformance.echo" && len(c["hosts"].([]any)) == 1 {
			owned = true
		}
	}
	if !owned {
		t.Errorf("conformance.echo not routed through the gateway: %v", host["capabilities"])
	}
	if h := get("/health"); h["status"] != "ok" {
		t.Errorf("/health: %v", h)
	}
	resp, err := http.Post(base+"/invoke", "application/json",
		strings.NewReader(`{"capability_id":"conformance.echo","payload":{"message":"hi"},"correlation_id":"c-node"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"outcome":"success"`) {
		t.Errorf("routed invoke: %d %s", resp.StatusCode, body)
	}
}

// TestCHPGatewayNeedsHTTP: a gateway without an HTTP listener is a
// configuration error.
func TestCHPGatewayNeedsHTTP(t *testing.T) {
	env(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Memory: true, TCP: "127.0.0.1:0", NoSocket: true, CHPGateway: []string{"http://127.0.0.1:1"}})
	if err == nil {
		_ = n.Stop(ctx)
		t.Fatal("started a gateway with no HTTP listener")
	}
	var ce *node.ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("want a ConfigError, got %v", err)
	}
}

// TestCHPGatewayDurableAcrossRestart: a node that keeps state keeps the
// gateway's exactly-once results — after a restart, with the member gone,
// a retried invocation id still replays.
func TestCHPGatewayDurableAcrossRestart(t *testing.T) {
	env(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	member, err := node.Start(ctx, node.Config{Name: "member", Memory: true, NoSocket: true, HTTP: "127.0.0.1:0", CHPFixtures: true})
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	cfg := node.Config{Name: "gw", DataDir: data, NoSocket: true, HTTP: "127.0.0.1:0",
		CHPGateway: []string{"http://" + member.Addr("http")}}
	body := `{"capability_id":"conformance.echo","payload":{"message":"once"},"invocation_id":"inv-durable","correlation_id":"c-d"}`
	invoke := func(n *node.Node) string {
		t.Helper()
		resp, err := http.Post("http://"+n.Addr("http")+"/invoke", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	gw, err := node.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := invoke(gw); !strings.Contains(got, `"outcome":"success"`) || strings.Contains(got, `"replayed"`) {
		t.Fatalf("first invoke: %s", got)
	}
	if err := gw.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := member.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	gw, err = node.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Stop(ctx)
	if got := invoke(gw); !strings.Contains(got, `"replayed":true`) || !strings.Contains(got, `"outcome":"success"`) {
		t.Errorf("retry after the gateway's restart: %s", got)
	}
}

// TestCHPGatewayKeepsNamedKeyScope: the gateway reaches its members
// without credentials and cannot enforce a named key's scope, so a scoped
// named key (CHP_HOST_API_KEYS=name:key:scope) is not accepted there —
// alice, limited to kv.*, must not invoke conformance.echo through it —
// while an unscoped key is.
func TestCHPGatewayKeepsNamedKeyScope(t *testing.T) {
	env(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	member, err := node.Start(ctx, node.Config{Name: "member", Memory: true, NoSocket: true, HTTP: "127.0.0.1:0", CHPFixtures: true})
	if err != nil {
		t.Fatal(err)
	}
	defer member.Stop(ctx)
	t.Setenv("CHP_HOST_API_KEYS", "alice:alice-key:kv.*,bob:bob-key")
	gw, err := node.Start(ctx, node.Config{Name: "gw", Memory: true, NoSocket: true, HTTP: "127.0.0.1:0",
		CHPGateway: []string{"http://" + member.Addr("http")}})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Stop(ctx)
	invoke := func(key string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, "POST", "http://"+gw.Addr("http")+"/invoke",
			strings.NewReader(`{"capability_id":"conformance.echo","payload":{"message":"hi"}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-CHP-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if status, body := invoke("alice-key"); strings.Contains(body, `"outcome":"success"`) {
		t.Errorf("alice (scope kv.*) invoked conformance.echo through the gateway: %d %s", status, body)
	}
	if status, body := invoke("bob-key"); status != 200 || !strings.Contains(body, `"outcome":"success"`) {
		t.Errorf("bob (unscoped): %d %s", status, body)
	}
}

// TestCHPGatewayOnlyScopedKeysIsAConfigError: with every key scoped the
// gateway would have no key left and accept anyone; the node refuses to
// start instead.
func TestCHPGatewayOnlyScopedKeysIsAConfigError(t *testing.T) {
	env(t)
	t.Setenv("CHP_HOST_API_KEYS", "alice:alice-key:kv.*")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Memory: true, NoSocket: true, HTTP: "127.0.0.1:0", CHPGateway: []string{"http://127.0.0.1:1"}})
	if err == nil {
		_ = n.Stop(ctx)
		t.Fatal("started a gateway whose only key is scoped")
	}
	var ce *node.ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("want a ConfigError, got %v", err)
	}
}
