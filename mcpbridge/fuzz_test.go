package mcpbridge

import (
	"encoding/json"
	"testing"

	"github.com/capmesh/capmesh/jsonrpc"
)

// FuzzToolResult feeds arbitrary capability results and error data to the
// mappings NewServer applies: whatever a host answers, the MCP result is
// well formed JSON, and an error is always a tool error.
func FuzzToolResult(f *testing.F) {
	for _, s := range []string{
		`{"content":[{"type":"text","text":"hi"}],"structuredContent":{"sum":3}}`,
		`{"greeting":"hello"}`, `[1,2]`, `"text"`, `null`, `{"content":[{"type":"nope"}]}`,
		`{"outcome":"denied","evidence_ids":["e1"],"correlation":{"correlation_id":"c"},"denial":{"code":"x","message":"y"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if json.Valid(data) {
			r := toolResult(json.RawMessage(data))
			if _, err := json.Marshal(r); err != nil {
				t.Fatalf("result of %q does not marshal: %v", data, err)
			}
			e := toolError(&jsonrpc.Error{Code: -32099, Message: "m", Data: json.RawMessage(data)})
			if !e.IsError {
				t.Fatal("an error mapped to a successful result")
			}
			if _, err := json.Marshal(e); err != nil {
				t.Fatalf("tool error with data %q does not marshal: %v", data, err)
			}
		}
		_ = progressToken(json.RawMessage(data))
	})
}
