package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/boundary/governance"
	"github.com/capmesh/capmesh/chp/chprpc"
	"github.com/capmesh/capmesh/fingerprint"
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/wire"
)

// invocationResult decodes the InvocationResult a refused call carries.
func invocationResult(t *testing.T, err error) (*jsonrpc.Error, chp.InvocationResult) {
	t.Helper()
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		t.Fatalf("want a JSON-RPC error, got %v", err)
	}
	var r chp.InvocationResult
	if jerr := json.Unmarshal(je.Data, &r); jerr != nil {
		t.Fatalf("error data is not an InvocationResult: %v (%s)", jerr, je.Data)
	}
	return je, r
}

func TestWrapServesToolsAsCapabilities(t *testing.T) {
	ctx := testCtx(t)
	b := serveBridge(t, startServer(t, testServer("adds two numbers")), nil)
	if got := b.Host.Info().Domain; got != "calc" {
		t.Errorf("domain %q, want calc (from test-servers/calc)", got)
	}
	c := dial(t, b.Host.Addr("unix"), nil)

	in, err := wire.Inspect(ctx, c, &wire.InspectOptions{Transport: "unix", ProbeMethods: true})
	if err != nil {
		t.Fatal(err)
	}
	if in.Report.Verified != 3 {
		t.Errorf("verified level %d, want 3", in.Report.Verified)
	}
	methods := map[string]bool{}
	for _, m := range b.Host.Envelope().Methods {
		methods[m] = true
	}
	for _, m := range []string{"calc.get_sum", "calc.fail", "calc.slow_count"} {
		if !methods[m] {
			t.Errorf("capabilities.list lacks %s: %v", m, b.Host.Envelope().Methods)
		}
	}

	var res mcp.CallToolResult
	if err := c.Call(ctx, "calc.get_sum", map[string]int{"a": 2, "b": 40}, &res); err != nil {
		t.Fatal(err)
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if string(sc) != `{"sum":42}` {
		t.Errorf("structured content %s, want {\"sum\":42}", sc)
	}

	// Invalid input is refused by the host's boundary, before the MCP server.
	err = c.Call(ctx, "calc.get_sum", map[string]any{"a": "two", "b": 40}, nil)
	je, r := invocationResult(t, err)
	if je.Code != jsonrpc.InvalidParams || r.Denial == nil || r.Denial.Code != chp.CodeInputSchemaValidationFailed || len(r.EvidenceIDs) == 0 {
		t.Errorf("invalid input: code %d, result %+v", je.Code, r)
	}

	// A tool error is a failed invocation with evidence.
	err = c.Call(ctx, "calc.fail", map[string]any{}, nil)
	je, r = invocationResult(t, err)
	if je.Code != chprpc.CodeFailed || r.Outcome != chp.OutcomeFailure || !strings.Contains(je.Message, "this tool always fails") || len(r.EvidenceIDs) == 0 {
		t.Errorf("tool error: code %d %q, result %+v", je.Code, je.Message, r)
	}

	// The evidence chain of the successful call verifies.
	v, err := b.Host.Boundary().Verify(ctx, r.Correlation.CorrelationID)
	if err != nil || !v.Valid {
		t.Errorf("evidence chain: %+v, %v", v, err)
	}
}

func TestWrapDescriptorsCarryFingerprints(t *testing.T) {
	b := serveBridge(t, startServer(t, testServer("adds two numbers")), nil)
	tl, ok := b.ToolFor("calc.get_sum")
	if !ok || tl.Name != "get-sum" {
		t.Fatalf("ToolFor(calc.get_sum) = %+v, %v", tl, ok)
	}
	want, err := ToolHash(tl.Def)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	risks := map[string]string{}
	for _, d := range b.Host.Boundary().Capabilities() {
		risks[d.ID] = d.Risk
		if d.ID != "calc.get_sum" {
			continue
		}
		found = true
		var meta map[string]any
		_ = json.Unmarshal(d.Metadata, &meta)
		if meta["mcp_tool"] != "get-sum" || meta["tool_hash"] != want {
			t.Errorf("metadata %s, want mcp_tool get-sum and tool_hash %s", d.Metadata, want)
		}
		if meta["idempotent"] != true {
			t.Errorf("idempotentHint not declared: %s", d.Metadata)
		}
		if !strings.Contains(string(d.InputSchema), `"a"`) {
			t.Errorf("input schema %s is not the tool's", d.InputSchema)
		}
	}
	if !found {
		t.Fatal("no descriptor for calc.get_sum")
	}
	// read-only → low, destructive → high, no hints → medium.
	if risks["calc.get_sum"] != "low" || risks["calc.fail"] != "high" || risks["calc.slow_count"] != "medium" {
		t.Errorf("risk tiers %v", risks)
	}
}

func TestWrapChangedToolIsAChangedHash(t *testing.T) {
	ctx := testCtx(t)
	first := serveBridge(t, startServer(t, testServer("adds two numbers")), nil)
	pins, err := first.Link()
	if err != nil {
		t.Fatal(err)
	}
	// The same server, its get-sum description changed.
	changed := serveBridge(t, startServer(t, testServer("adds two numbers; also sends them elsewhere")),
		&WrapConfig{Pins: pins.ToolRefs})
	link, err := changed.Link()
	if err != nil {
		t.Fatal(err)
	}
	diff := fingerprint.DiffCapabilityLinks(pins, link)
	var fields []string
	for _, c := range diff.Changed {
		fields = append(fields, c.Field)
	}
	if strings.Join(fields, ",") != "runtimeHash" {
		t.Errorf("diff of the links names %v, want runtimeHash", fields)
	}
	td := fingerprint.DiffToolRefs(pins.ToolRefs, link.ToolRefs)
	if len(td.HashChanged) != 1 || td.HashChanged[0].ToolKey != "get-sum" || len(td.OnlyInFirst)+len(td.OnlyInSecond) != 0 {
		t.Errorf("tool diff %+v, want get-sum changed only", td)
	}
	for _, tl := range changed.Tools() {
		if tl.Blocked != (tl.Name == "get-sum") {
			t.Errorf("tool %s blocked=%v (hash %s, pinned %s)", tl.Name, tl.Blocked, tl.Hash, tl.Pinned)
		}
	}

	// The changed tool is refused by policy, with evidence; the others run.
	c := dial(t, changed.Host.Addr("unix"), nil)
	err = c.Call(ctx, "calc.get_sum", map[string]int{"a": 1, "b": 2}, nil)
	je, r := invocationResult(t, err)
	if je.Code != chprpc.CodeDenied || r.Denial == nil || len(r.EvidenceIDs) == 0 {
		t.Errorf("changed tool: code %d, result %+v", je.Code, r)
	}
	if err := c.Call(ctx, "calc.slow_count", map[string]int{"steps": 0}, nil); err != nil {
		t.Errorf("an unchanged pinned tool: %v", err)
	}
}

func TestWrapProgressAndCorrelationPassThrough(t *testing.T) {
	ctx := testCtx(t)
	b := serveBridge(t, startServer(t, testServer("adds")), nil)
	notes := make(chan json.RawMessage, 16)
	c := dial(t, b.Host.Addr("unix"), notes)
	params := map[string]any{
		"steps": 3,
		"_meta": map[string]any{"correlation": map[string]any{
			"correlation_id": "corr-progress-1",
			"baggage":        map[string]any{BaggageProgressToken: "tok-7"},
		}},
	}
	var res mcp.CallToolResult
	if err := c.Call(ctx, "calc.slow_count", params, &res); err != nil {
		t.Fatal(err)
	}
	if got := textOf(res.Content); got != "correlation corr-progress-1" {
		t.Errorf("the MCP server saw %q, want the CHP correlation id", got)
	}
	for i := 1; i <= 3; i++ {
		var p progressParams
		select {
		case raw := <-notes:
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatal(err)
			}
		case <-ctx.Done():
			t.Fatalf("progress notification %d never arrived", i)
		}
		if string(p.ProgressToken) != `"tok-7"` || p.Progress != float64(i) || p.Total == nil || *p.Total != 3 || p.CorrelationID != "corr-progress-1" {
			t.Errorf("notification %d: %+v", i, p)
		}
	}
}

func TestWrapKeepsHostPolicy(t *testing.T) {
	ctx := testCtx(t)
	// A host policy capping risk at low refuses the medium-risk tool.
	b := serveBridge(t, startServer(t, testServer("adds")), &WrapConfig{Host: &host.Config{CHP: boundary.Config{Policy: &governance.PolicyConfig{MaxRiskTier: "low"}}}})
	c := dial(t, b.Host.Addr("unix"), nil)
	if err := c.Call(ctx, "calc.get_sum", map[string]int{"a": 1, "b": 2}, nil); err != nil {
		t.Errorf("a low-risk tool: %v", err)
	}
	_, r := invocationResult(t, c.Call(ctx, "calc.slow_count", map[string]int{"steps": 0}, nil))
	if r.Outcome != chp.OutcomeDenied || len(r.EvidenceIDs) == 0 {
		t.Errorf("a medium-risk tool under a low cap: %+v", r)
	}
}

func TestWrapStopsWhenTheServerGoes(t *testing.T) {
	ct, st := mcp.NewInMemoryTransports()
	ss, err := testServer("adds").Connect(testCtx(t), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Wrap(testCtx(t), ct, &WrapConfig{Logger: quietLogger(), Host: &host.Config{
		Socket: filepath.Join(shortDir(t), "b.sock"), Ephemeral: true, NoAnnounce: true, Logger: quietLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Serve(context.Background()) }()
	<-b.Host.Ready()
	ss.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrSessionEnded) {
			t.Errorf("Serve returned %v, want ErrSessionEnded", err)
		}
	case <-testCtx(t).Done():
		t.Fatal("the host kept serving after the MCP server went away")
	}
}

// TestWrapToolListChanged: the server changes get-sum's definition, adds a
// tool and removes one while wrapped. The changed and the removed tool are
// disabled (their calls skipped with evidence), the new one is served.
func TestWrapToolListChanged(t *testing.T) {
	ctx := testCtx(t)
	srv := testServer("adds")
	changed := make(chan []Tool, 4)
	b := serveBridge(t, startServer(t, srv), &WrapConfig{OnToolsChanged: func(ts []Tool) { changed <- ts }})
	c := dial(t, b.Host.Addr("unix"), nil)
	if err := c.Call(ctx, "calc.get_sum", map[string]int{"a": 1, "b": 2}, nil); err != nil {
		t.Fatal(err)
	}

	mcp.AddTool(srv, &mcp.Tool{Name: "get-sum", Description: "adds, and keeps a copy"},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "get-product", Description: "multiplies"},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A * in.B}, nil
		})
	srv.RemoveTools("fail")
	// Wait for the bridge to have applied all three changes.
	for {
		var ts []Tool
		select {
		case ts = <-changed:
		case <-ctx.Done():
			t.Fatal("the bridge never applied the tool list change")
		}
		state := map[string]bool{}
		for _, tl := range ts {
			state[tl.Name] = tl.Disabled
		}
		if state["get-sum"] && state["fail"] {
			if dis, ok := state["get-product"]; ok && !dis {
				break
			}
		}
	}
	for _, m := range []string{"calc.get_sum", "calc.fail"} {
		_, r := invocationResult(t, c.Call(ctx, m, map[string]int{"a": 1, "b": 2}, nil))
		if r.Outcome != chp.OutcomeSkipped || len(r.EvidenceIDs) == 0 {
			t.Errorf("%s after the change: %+v", m, r)
		}
	}
	var res mcp.CallToolResult
	if err := c.Call(ctx, "calc.get_product", map[string]int{"a": 6, "b": 7}, &res); err != nil {
		t.Fatalf("the added tool: %v", err)
	}
	if sc, _ := json.Marshal(res.StructuredContent); string(sc) != `{"sum":42}` {
		t.Errorf("get-product said %s", sc)
	}
}

// TestWrapBudgetsAndApproval: autonomy profiles set through Describe are
// enforced by the boundary before the MCP server is called.
func TestWrapBudgetsAndApproval(t *testing.T) {
	ctx := testCtx(t)
	one := int64(1)
	b := serveBridge(t, startServer(t, testServer("adds")), &WrapConfig{Describe: func(tl Tool, d *chp.CapabilityDescriptor) {
		switch tl.Name {
		case "get-sum":
			d.Autonomy = &chp.AutonomyProfile{Tier: "approval_required", RollbackPolicy: "none"}
		case "slowCount":
			d.Autonomy = &chp.AutonomyProfile{Tier: "supervised", ActionLimit: &one, RollbackPolicy: "none"}
		}
	}})
	c := dial(t, b.Host.Addr("unix"), nil)
	_, r := invocationResult(t, c.Call(ctx, "calc.get_sum", map[string]int{"a": 1, "b": 2}, nil))
	if r.Denial == nil || r.Denial.Code != chp.CodeApprovalRequired || len(r.EvidenceIDs) == 0 {
		t.Errorf("approval-gated tool: %+v", r)
	}
	params := map[string]any{"steps": 0, "_meta": map[string]any{"correlation_id": "budget-1"}}
	if err := c.Call(ctx, "calc.slow_count", params, nil); err != nil {
		t.Fatalf("first call within the budget: %v", err)
	}
	_, r = invocationResult(t, c.Call(ctx, "calc.slow_count", params, nil))
	if r.Denial == nil || r.Denial.Code != chp.CodeBudgetExceeded || len(r.EvidenceIDs) == 0 {
		t.Errorf("second call of the correlation: %+v", r)
	}
}
