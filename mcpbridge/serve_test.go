package mcpbridge

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/boundary/governance"
	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/jsonrpc"
)

// nativeHost serves a capmesh host with greet.hello and greet.secret, the
// latter blocked by its policy.
func nativeHost(t *testing.T) *host.Host {
	t.Helper()
	h, err := host.New(host.Info{Name: "greeter", Version: "1.0.0", Domain: "greet"}, &host.Config{
		Socket: filepath.Join(shortDir(t), "g.sock"), Ephemeral: true, NoAnnounce: true, Logger: quietLogger(),
		CHP: boundary.Config{Policy: &governance.PolicyConfig{BlockCapabilityIDs: []string{"greet.secret"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	type in struct {
		Name string `json:"name" jsonschema:"who to greet"`
	}
	type out struct {
		Greeting string `json:"greeting"`
	}
	hello := func(_ context.Context, in in) (out, error) { return out{"hello " + in.Name}, nil }
	if err := host.Register(h, "greet.hello", hello, host.Description("greets")); err != nil {
		t.Fatal(err)
	}
	if err := host.Register(h, "greet.secret", hello); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	<-h.Ready()
	return h
}

// mcpClient connects a go-sdk client to s in memory; progress
// notifications go to notes.
func mcpClient(t *testing.T, s *mcp.Server, notes chan<- *mcp.ProgressNotificationParams) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(testCtx(t), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	opts := &mcp.ClientOptions{}
	if notes != nil {
		opts.ProgressNotificationHandler = func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { notes <- r.Params }
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1.0.0"}, opts).Connect(testCtx(t), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func hostServer(t *testing.T, addr string) *mcp.Server {
	t.Helper()
	up := NewUpstream("unix", addr)
	t.Cleanup(func() { up.Close() })
	caps, err := HostCapabilities(testCtx(t), up, "")
	if err != nil {
		t.Fatal(err)
	}
	return NewServer(caps, up, nil)
}

func TestServeHostAsMCPServer(t *testing.T) {
	ctx := testCtx(t)
	h := nativeHost(t)
	cs := mcpClient(t, hostServer(t, h.Addr("unix")), nil)

	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
		if tl.Name == "greet.hello" {
			schema, _ := json.Marshal(tl.InputSchema)
			if !strings.Contains(string(schema), `"name"`) || tl.Description != "greets" {
				t.Errorf("greet.hello: schema %s, description %q", schema, tl.Description)
			}
		}
	}
	if strings.Join(names, ",") != "greet.hello,greet.secret" {
		t.Errorf("tools %v, want greet.hello and greet.secret", names)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "greet.hello", Arguments: map[string]any{"name": "ada"}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if string(sc) != `{"greeting":"hello ada"}` {
		t.Errorf("structured content %s", sc)
	}

	// Invalid input: a tool error naming the field, with evidence.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "greet.hello", Arguments: map[string]any{"name": 7}})
	if err != nil {
		t.Fatal(err)
	}
	ec := errorContent(t, res)
	if ec.Code != int64(jsonrpc.InvalidParams) || ec.Denial == nil || ec.Denial.Code != chp.CodeInputSchemaValidationFailed || len(ec.EvidenceIDs) == 0 {
		t.Errorf("invalid input: %+v", ec)
	}

	// A denial by policy: a tool error with the evidence ids, which the
	// host's chain holds.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "greet.secret", Arguments: map[string]any{"name": "eve"}})
	if err != nil {
		t.Fatal(err)
	}
	ec = errorContent(t, res)
	if ec.Outcome != chp.OutcomeDenied || len(ec.EvidenceIDs) == 0 || ec.CorrelationID == "" {
		t.Fatalf("denied call: %+v", ec)
	}
	if text := textOf(res.Content); !strings.Contains(text, ec.EvidenceIDs[0]) {
		t.Errorf("the error text %q does not name the evidence", text)
	}
	v, err := h.Boundary().Verify(ctx, ec.CorrelationID)
	if err != nil || !v.Valid {
		t.Errorf("evidence of the denial: %+v %v", v, err)
	}
}

// errorContent decodes the structured content of a tool error.
func errorContent(t *testing.T, res *mcp.CallToolResult) ToolErrorContent {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want a tool error, got %+v", res)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var ec ToolErrorContent
	if err := json.Unmarshal(raw, &ec); err != nil {
		t.Fatal(err)
	}
	return ec
}

// TestServeWrappedBothWays runs MCP client → serve → wrapped host → MCP
// server: results, tool errors and progress cross both bridges.
func TestServeWrappedBothWays(t *testing.T) {
	ctx := testCtx(t)
	b := serveBridge(t, startServer(t, testServer("adds")), nil)
	notes := make(chan *mcp.ProgressNotificationParams, 16)
	cs := mcpClient(t, hostServer(t, b.Host.Addr("unix")), notes)

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "calc.get_sum", Arguments: map[string]any{"a": 1, "b": 2}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if string(sc) != `{"sum":3}` {
		t.Errorf("structured content %s, want the MCP server's own", sc)
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "calc.fail", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if ec := errorContent(t, res); ec.Outcome != chp.OutcomeFailure || !strings.Contains(ec.Message, "always fails") {
		t.Errorf("tool error: %+v", ec)
	}

	p := &mcp.CallToolParams{Name: "calc.slow_count", Arguments: map[string]any{"steps": 2}}
	p.SetProgressToken("client-token")
	if res, err = cs.CallTool(ctx, p); err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	for i := 1; i <= 2; i++ {
		select {
		case n := <-notes:
			if n.ProgressToken != "client-token" || n.Progress != float64(i) || n.Total != 2 {
				t.Errorf("notification %d: %+v", i, n)
			}
		case <-ctx.Done():
			t.Fatalf("progress %d never arrived", i)
		}
	}
}

// fakeNode answers ipc.list with the given services, ignoring
// include_untrusted, so that the bridge's own check is what is tested.
func fakeNode(t *testing.T, services []map[string]any) string {
	t.Helper()
	return fakeNodeFunc(t, func() []map[string]any { return services })
}

// fakeNodeFunc is fakeNode with a list that may change between calls.
func fakeNodeFunc(t *testing.T, services func() []map[string]any) string {
	t.Helper()
	l, err := endpoint.ListenUnix(filepath.Join(shortDir(t), "node.sock"), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := jsonrpc.NewServer(jsonrpc.Map{"ipc.list": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return map[string]any{"services": services()}, nil
	})}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = srv.Serve(ctx, l) }()
	t.Cleanup(func() { cancel(); wg.Wait() })

	return l.Path()
}

func TestServeNodeListsOnlyTrustedProviders(t *testing.T) {
	ctx := testCtx(t)
	trusted := nativeHost(t)
	untrusted := serveBridge(t, startServer(t, testServer("adds")), nil)
	node := fakeNode(t, []map[string]any{
		{"primal_id": "greeter", "endpoint": "unix://" + trusted.Addr("unix"), "trust": map[string]any{"trusted": true}},
		{"primal_id": "calc", "endpoint": "unix://" + untrusted.Host.Addr("unix"), "trust": map[string]any{"trusted": false, "reason": "not enrolled"}},
		{"primal_id": "gone", "endpoint": "unix://" + filepath.Join(shortDir(t), "gone.sock"), "trust": map[string]any{"trusted": true}},
	})
	up := NewUpstream("unix", node)
	defer up.Close()
	caps, err := NodeCapabilities(ctx, up, nil, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range caps {
		ids = append(ids, c.Descriptor.ID)
		if c.Provider != "greeter" {
			t.Errorf("%s from %s", c.Descriptor.ID, c.Provider)
		}
	}
	sort.Strings(ids)
	if strings.Join(ids, ",") != "greet.hello,greet.secret" {
		t.Errorf("capabilities %v, want only the trusted greeter's", ids)
	}
}

// TestServeFollowsTheNode: with Discover, each tools/list asks the node
// again — a provider that registers later appears, one that loses trust
// disappears.
func TestServeFollowsTheNode(t *testing.T) {
	ctx := testCtx(t)
	greeter := nativeHost(t)
	calc := serveBridge(t, startServer(t, testServer("adds")), nil)
	var mu sync.Mutex
	services := []map[string]any{
		{"primal_id": "greeter", "endpoint": "unix://" + greeter.Addr("unix"), "trust": map[string]any{"trusted": true}},
	}
	node := fakeNodeFunc(t, func() []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		return append([]map[string]any(nil), services...)
	})
	up := NewUpstream("unix", node)
	t.Cleanup(func() { up.Close() })
	discover := func(ctx context.Context) ([]Capability, error) { return NodeCapabilities(ctx, up, nil, quietLogger()) }
	caps, err := discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cs := mcpClient(t, NewServer(caps, up, &ServeConfig{Discover: discover, Logger: quietLogger()}), nil)
	names := func() string {
		lt, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var ns []string
		for _, tl := range lt.Tools {
			ns = append(ns, tl.Name)
		}
		sort.Strings(ns)
		return strings.Join(ns, ",")
	}
	if got := names(); got != "greet.hello,greet.secret" {
		t.Fatalf("tools %s", got)
	}
	mu.Lock()
	services = append(services, map[string]any{"primal_id": "calc", "endpoint": "unix://" + calc.Host.Addr("unix"), "trust": map[string]any{"trusted": true}})
	mu.Unlock()
	if got := names(); got != "calc.fail,calc.get_sum,calc.slow_count,greet.hello,greet.secret" {
		t.Errorf("after calc registered: %s", got)
	}
	mu.Lock()
	services[0] = map[string]any{"primal_id": "greeter", "endpoint": "unix://" + greeter.Addr("unix"), "trust": map[string]any{"trusted": false, "reason": "revoked"}}
	mu.Unlock()
	if got := names(); got != "calc.fail,calc.get_sum,calc.slow_count" {
		t.Errorf("after greeter lost trust: %s", got)
	}
}
