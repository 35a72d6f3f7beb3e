package chprpc

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/chp/boundary/evlog"
	"github.com/capmesh/capmesh/chp/witnessing"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/jsonrpc"
)

// TestWitnessHandlers: the JSON-RPC witnessing methods answer the HTTP
// objects, and a refusal is -32602 with the CHP code in its data.
func TestWitnessHandlers(t *testing.T) {
	ctx := context.Background()
	b := fixtureBoundary(t, evidence.NewMemory())
	hs := WitnessHandlers(b)
	call := func(method, params string) (any, error) {
		return hs[method].Handle(ctx, &jsonrpc.Request{Method: method, Params: json.RawMessage(params)})
	}
	if _, err := Handlers(b)["chp.invoke"].Handle(ctx, &jsonrpc.Request{Method: "chp.invoke",
		Params: json.RawMessage(`{"capability_id":"conformance.echo","correlation_id":"c1","payload":{"value":"x"}}`)}); err != nil {
		t.Fatal(err)
	}
	v, err := call("chp.head", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	head := v.(*witnessing.StoreHead)
	_, key, _ := ed25519.GenerateKey(nil)
	stmt := func(sh, rev string) string {
		raw, _ := witnessing.NewChainWitness("test-host", head.Sequence, sh, rev, "w", key, "2026-01-01T00:00:00Z")
		return string(raw)
	}
	for params, code := range map[string]string{
		`{"kind":1}`:                                  "invalid_witness",
		stmt(strings.Repeat("0", 64), ""):             "head_mismatch",
		stmt(head.StoreHead, strings.Repeat("a", 64)): "revocation_head_mismatch",
	} {
		_, err := call("chp.witness", params)
		var rpcErr *jsonrpc.Error
		if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.InvalidParams || !strings.Contains(string(rpcErr.Data), `"`+code+`"`) {
			t.Errorf("chp.witness: %v, want -32602 %s", err, code)
		}
	}
	if _, err := call("chp.witness", stmt(head.StoreHead, "")); err != nil {
		t.Fatal(err)
	}
	v, err = call("chp.witnesses", ``)
	if err != nil || len(v.(map[string]any)["witnesses"].([]json.RawMessage)) != 1 {
		t.Fatalf("chp.witnesses: %v %v", v, err)
	}
	if _, err := call("chp.log.inclusion", `{}`); !errors.Is(err, jsonrpc.InvalidParams) {
		t.Fatalf("chp.log.inclusion without sequence: %v", err)
	}
	var rpcErr *jsonrpc.Error
	if _, err := call("chp.log.head", `{}`); !errors.As(err, &rpcErr) || !strings.Contains(string(rpcErr.Data), "not_supported") {
		t.Fatalf("chp.log.head on an unsigned host: %v", err)
	}
}

// TestWitnessQuotaRPC: chp.witness refuses one witness's statements past
// evlog.MaxPerIssuer with -32046 (data.code issuer_quota_exceeded) while
// another witness gets in; the same statement again is accepted.
func TestWitnessQuotaRPC(t *testing.T) {
	ctx := context.Background()
	b := fixtureBoundary(t, evidence.NewMemory())
	hs := WitnessHandlers(b)
	call := func(method, params string) (any, error) {
		return hs[method].Handle(ctx, &jsonrpc.Request{Method: method, Params: json.RawMessage(params)})
	}
	if _, err := Handlers(b)["chp.invoke"].Handle(ctx, &jsonrpc.Request{Method: "chp.invoke",
		Params: json.RawMessage(`{"capability_id":"conformance.echo","correlation_id":"c1","payload":{"value":"x"}}`)}); err != nil {
		t.Fatal(err)
	}
	v, err := call("chp.head", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	head := v.(*witnessing.StoreHead)
	_, flood, _ := ed25519.GenerateKey(nil)
	_, other, _ := ed25519.GenerateKey(nil)
	stmt := func(key ed25519.PrivateKey, i int) string {
		raw, _ := witnessing.NewChainWitness("test-host", head.Sequence, head.StoreHead, "", "w", key, fmt.Sprintf("2026-01-01T00:00:%02dZ", 10+i))
		return string(raw)
	}
	for i := range evlog.MaxPerIssuer {
		if _, err := call("chp.witness", stmt(flood, i)); err != nil {
			t.Fatal(err)
		}
	}
	var rpcErr *jsonrpc.Error
	if _, err := call("chp.witness", stmt(flood, evlog.MaxPerIssuer)); !errors.As(err, &rpcErr) || rpcErr.Code != CodeQuotaExceeded ||
		!strings.Contains(string(rpcErr.Data), "issuer_quota_exceeded") {
		t.Fatalf("past the quota: %v", err)
	}
	for _, p := range []string{stmt(flood, 0), stmt(other, 0)} {
		if _, err := call("chp.witness", p); err != nil {
			t.Fatal(err)
		}
	}
}
