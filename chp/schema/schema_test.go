package schema

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestValidate: a protocol object that matches its schema passes, one that
// breaks it fails, an unknown schema name is an error.
func TestValidate(t *testing.T) {
	good := map[string]any{"code": "policy_blocked", "message": "no", "retryable": false,
		"details": map[string]any{}, "invariant_id": nil}
	if err := Validate("denial-reason", good); err != nil {
		t.Fatalf("valid denial: %v", err)
	}
	bad := map[string]any{"code": 7, "message": "no", "retryable": "yes"}
	if err := Validate("denial-reason", bad); err == nil {
		t.Error("an invalid denial validated")
	}
	if err := Validate("no-such-object", good); err == nil || !strings.Contains(err.Error(), "no schema") {
		t.Errorf("unknown schema: %v", err)
	}
}

// TestCompilePayload: a declared schema may reference the embedded protocol
// schemas but nothing else, an empty one is no constraint, and a failure is
// described by location without quoting the payload.
func TestCompilePayload(t *testing.T) {
	if p, err := CompilePayload(PayloadURL("a", "1", "input"), json.RawMessage(`{}`)); p != nil || err != nil {
		t.Errorf("empty schema: %v %v", p, err)
	}
	if _, err := CompilePayload(PayloadURL("a", "1", "input"), json.RawMessage(`{"$ref":"file:///etc/passwd"}`)); err == nil {
		t.Error("an external $ref compiled")
	}
	p, err := CompilePayload(PayloadURL("a", "1", "input"),
		json.RawMessage(`{"type":"object","required":["key"],"properties":{"key":{"type":"string","pattern":"^k"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := p.Validate(json.RawMessage(`{"key":"k1"}`)); !ok {
		t.Error("a valid payload failed")
	}
	path, msg, ok := p.Validate(json.RawMessage(`{"key":"secret-value"}`))
	if ok || path != "/key" || strings.Contains(msg, "secret-value") {
		t.Errorf("invalid payload: path %q msg %q ok %v", path, msg, ok)
	}
}
