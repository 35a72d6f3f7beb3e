package mcpbridge

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/boundary/governance"
	"github.com/capmesh/capmesh/chp/chprpc"
	"github.com/capmesh/capmesh/conformance"
	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/fingerprint"
	"github.com/capmesh/capmesh/host"
)

// everythingVersion is the version of @modelcontextprotocol/server-everything
// the end-to-end test installs from the npm registry.
const everythingVersion = "2026.8.31"

// everythingPackage returns the directory of an installed
// @modelcontextprotocol/server-everything: $CAPMESH_MCP_EVERYTHING when set
// (the package directory, holding dist/index.js), else a fresh npm install
// into a temporary directory. The test is skipped when node or npm is
// missing, or when the install fails, unless CAPMESH_REQUIRE_MCP_E2E=1.
func everythingPackage(t *testing.T) string {
	t.Helper()
	skip := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CAPMESH_REQUIRE_MCP_E2E") == "1" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	if _, err := exec.LookPath("node"); err != nil {
		skip("node is not installed: skipping the end-to-end test against @modelcontextprotocol/server-everything (install Node.js and npm to run it)")
	}
	if dir := os.Getenv("CAPMESH_MCP_EVERYTHING"); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "dist", "index.js")); err != nil {
			t.Fatalf("CAPMESH_MCP_EVERYTHING=%s: %v", dir, err)
		}
		return dir
	}
	if _, err := exec.LookPath("npm"); err != nil {
		skip("npm is not installed: skipping the end-to-end test against @modelcontextprotocol/server-everything")
	}
	prefix := t.TempDir()
	cmd := exec.CommandContext(testCtx(t), "npm", "install", "--prefix", prefix, "--no-audit", "--no-fund", "--loglevel=error",
		"@modelcontextprotocol/server-everything@"+everythingVersion)
	if out, err := cmd.CombinedOutput(); err != nil {
		skip("npm install @modelcontextprotocol/server-everything@%s failed (offline?): %v\n%s", everythingVersion, err, out)
	}
	return filepath.Join(prefix, "node_modules", "@modelcontextprotocol", "server-everything")
}

// everythingTransport runs the server in pkg over stdio.
func everythingTransport(t *testing.T, pkg string) mcp.Transport {
	c := exec.Command("node", filepath.Join(pkg, "dist", "index.js"), "stdio")
	return &mcp.CommandTransport{Command: c}
}

func TestEverythingEndToEnd(t *testing.T) {
	pkg := everythingPackage(t)
	ctx := testCtx(t)
	b := serveBridge(t, everythingTransport(t, pkg), &WrapConfig{Host: &host.Config{CHP: boundary.Config{
		Policy: &governance.PolicyConfig{BlockCapabilityIDs: []string{"everything.get_env"}}}}})

	t.Run("list", func(t *testing.T) {
		want := map[string]string{"echo": "everything.echo", "get-sum": "everything.get_sum",
			"trigger-long-running-operation": "everything.trigger_long_running_operation", "get-env": "everything.get_env"}
		for _, tl := range b.Tools() {
			if m, ok := want[tl.Name]; ok {
				if tl.Method != m || len(tl.Hash) != 64 {
					t.Errorf("%s: method %s hash %q", tl.Name, tl.Method, tl.Hash)
				}
				delete(want, tl.Name)
			}
		}
		if len(want) > 0 {
			t.Errorf("tools missing: %v", want)
		}
	})

	c := dial(t, b.Host.Addr("unix"), nil)
	t.Run("valid", func(t *testing.T) {
		var res mcp.CallToolResult
		if err := c.Call(ctx, "everything.get_sum", map[string]any{"a": 2, "b": 40}, &res); err != nil {
			t.Fatal(err)
		}
		if got := textOf(res.Content); !strings.Contains(got, "42") {
			t.Errorf("get-sum said %q", got)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		je, r := invocationResult(t, c.Call(ctx, "everything.get_sum", map[string]any{"a": "2", "b": 40}, nil))
		if r.Denial == nil || r.Denial.Code != chp.CodeInputSchemaValidationFailed || len(r.EvidenceIDs) == 0 || !strings.Contains(je.Message, "/a") {
			t.Errorf("invalid input: %d %q %+v", je.Code, je.Message, r)
		}
	})
	t.Run("denied", func(t *testing.T) {
		je, r := invocationResult(t, c.Call(ctx, "everything.get_env", map[string]any{}, nil))
		if je.Code != chprpc.CodeDenied || r.Outcome != chp.OutcomeDenied || len(r.EvidenceIDs) == 0 {
			t.Fatalf("get-env: %d %+v", je.Code, r)
		}
		bundle, err := b.Host.Boundary().Export(ctx, r.Correlation.CorrelationID)
		if err != nil || len(bundle.Events) == 0 {
			t.Fatalf("evidence of the denial: %v", err)
		}
		v, err := b.Host.Boundary().Verify(ctx, r.Correlation.CorrelationID)
		if err != nil || !v.Valid {
			t.Errorf("chain: %+v %v", v, err)
		}
	})
	t.Run("progress", func(t *testing.T) {
		notes := make(chan json.RawMessage, 16)
		pc := dial(t, b.Host.Addr("unix"), notes)
		params := map[string]any{"duration": 0.2, "steps": 2, "_meta": map[string]any{"correlation": map[string]any{
			"correlation_id": "e2e-progress", "baggage": map[string]any{BaggageProgressToken: 99}}}}
		if err := pc.Call(ctx, "everything.trigger_long_running_operation", params, nil); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 2; i++ {
			select {
			case raw := <-notes:
				var p progressParams
				_ = json.Unmarshal(raw, &p)
				if string(p.ProgressToken) != "99" || p.Progress != float64(i) || p.CorrelationID != "e2e-progress" {
					t.Errorf("notification %d: %s", i, raw)
				}
			case <-ctx.Done():
				t.Fatalf("progress %d never arrived", i)
			}
		}
	})
	t.Run("changed", func(t *testing.T) { everythingChanged(t, pkg, b) })
}

// everythingChanged copies the server, changes get-sum's description, and
// wraps the copy pinned to the original's fingerprints: the link diff names
// get-sum, its calls are refused with evidence, and the host passes the
// audit at Level 3 with every CHP requirement met.
func everythingChanged(t *testing.T, pkg string, orig *Bridge) {
	ctx := testCtx(t)
	pins, err := orig.Link()
	if err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(t.TempDir(), "server-everything")
	if err := os.CopyFS(changed, os.DirFS(pkg)); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(changed, "dist", "tools", "get-sum.js")
	js, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	js2 := strings.Replace(string(js), `"Returns the sum of two numbers"`, `"Returns the sum of two numbers (and remembers them)"`, 1)
	if js2 == string(js) {
		t.Fatal("get-sum.js has no description to change")
	}
	if err := os.WriteFile(src, []byte(js2), 0o644); err != nil {
		t.Fatal(err)
	}
	// node resolves the package's imports from the original node_modules.
	if err := os.Symlink(filepath.Join(pkg, "..", ".."), filepath.Join(changed, "node_modules")); err != nil {
		t.Fatal(err)
	}
	allowed := []string{"everything.echo", "everything.get_sum", "everything.get_tiny_image", "everything.get_annotated_message"}
	b := serveBridge(t, everythingTransport(t, changed), &WrapConfig{Pins: pins.ToolRefs,
		Host: &host.Config{CHP: boundary.Config{Policy: &governance.PolicyConfig{AllowedCapabilityIDs: allowed}}}})
	link, err := b.Link()
	if err != nil {
		t.Fatal(err)
	}
	td := fingerprint.DiffToolRefs(pins.ToolRefs, link.ToolRefs)
	if len(td.HashChanged) != 1 || td.HashChanged[0].ToolKey != "get-sum" {
		t.Errorf("tool diff %+v, want get-sum changed", td)
	}
	c := dial(t, b.Host.Addr("unix"), nil)
	if _, r := invocationResult(t, c.Call(ctx, "everything.get_sum", map[string]any{"a": 1, "b": 2}, nil)); r.Outcome != chp.OutcomeDenied || len(r.EvidenceIDs) == 0 {
		t.Errorf("the changed get-sum: %+v", r)
	}
	var res mcp.CallToolResult
	if err := c.Call(ctx, "everything.echo", map[string]any{"message": "still pinned"}, &res); err != nil || !strings.Contains(textOf(res.Content), "still pinned") {
		t.Errorf("the unchanged echo: %v %+v", err, res)
	}

	rep := conformance.Audit(ctx, endpoint.Address{Scheme: "unix", Path: b.Host.Addr("unix")}, nil)
	if ok, why := rep.Meets(conformance.Requirement{Level: 3, CHP: true}); !ok {
		t.Errorf("audit of the wrapped server: %s (%s)", why, rep.Gap())
	}
	if rep.CHP == nil || rep.CHP.Failed != 0 {
		t.Errorf("CHP summary %+v", rep.CHP)
	}
}
