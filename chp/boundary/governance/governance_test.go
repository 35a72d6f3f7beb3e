package governance

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/chp"
)

// TestPolicyDecide: the first blocking rule names itself; a capability
// without a risk tier counts as medium; a pattern is a case-insensitive
// substring unless it is "re:".
func TestPolicyDecide(t *testing.T) {
	p := &PolicyConfig{BlockCapabilityIDs: []string{"x.blocked"}, MaxRiskTier: "medium",
		BlockPatterns: []string{"DROP TABLE", `re:secret_\d+`}}
	if err := p.Compile(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id, risk, payload, rule string
	}{
		{"x.ok", "", `{"q":"select"}`, ""},
		{"x.blocked", "low", `{}`, "block_capability_ids:x.blocked"},
		{"x.risky", "high", `{}`, "max_risk_tier:medium"},
		{"x.ok", "low", `{"q":"drop table users"}`, "block_patterns:DROP TABLE"},
		{"x.ok", "low", `{"k":"SECRET_42"}`, `block_patterns:re:secret_\d+`},
	} {
		rule, why := p.Decide(&chp.CapabilityDescriptor{ID: c.id, Risk: c.risk}, json.RawMessage(c.payload))
		if rule != c.rule || (rule != "" && why == "") {
			t.Errorf("%s %s %s: rule %q (%q), want %q", c.id, c.risk, c.payload, rule, why, c.rule)
		}
	}
	if err := (&PolicyConfig{MaxRiskTier: "extreme"}).Compile(); err == nil {
		t.Error("an unknown max_risk_tier compiled")
	}
	if err := (&PolicyConfig{BlockPatterns: []string{"re:("}}).Compile(); err == nil {
		t.Error("a bad regular expression compiled")
	}
}

// TestScopeAllows: exact ids, trailing-* prefixes and "*"; nil admits
// everything, an empty scope nothing.
func TestScopeAllows(t *testing.T) {
	for _, c := range []struct {
		scope []string
		id    string
		want  bool
	}{
		{nil, "a.b", true},
		{[]string{}, "a.b", false},
		{[]string{"a.b"}, "a.b", true},
		{[]string{"a.b"}, "a.bc", false},
		{[]string{"a.*"}, "a.c", true},
		{[]string{"a.*"}, "b.c", false},
		{[]string{"*"}, "z", true},
	} {
		if got := ScopeAllows(c.scope, c.id); got != c.want {
			t.Errorf("ScopeAllows(%q, %q) = %v, want %v", c.scope, c.id, got, c.want)
		}
	}
}

// TestCompileInvariant: each kind checks what it declares, and a bad
// declaration fails at compile time.
func TestCompileInvariant(t *testing.T) {
	env := &chp.InvocationEnvelope{CapabilityID: "kv.put", Payload: json.RawMessage(`{"key":"k","value":null}`)}
	for _, c := range []struct {
		kind, params string
		ok           bool
	}{
		{"required_payload_fields", `{"fields":["key"]}`, true},
		{"required_payload_fields", `{"fields":["key","value"]}`, false}, // null counts as missing
		{"max_payload_bytes", `{"max_bytes":4096}`, true},
		{"max_payload_bytes", `{"max_bytes":3}`, false},
		{"expression", `{"expression":"payload.key == 'k' && capability_id == 'kv.put'"}`, true},
		{"expression", `{"expression":"has(payload.missing)","message":"no missing"}`, false},
	} {
		inv, err := CompileInvariant(&chp.InvariantDescriptor{ID: "i", Kind: c.kind, Parameters: json.RawMessage(c.params)})
		if err != nil {
			t.Fatalf("%s %s: %v", c.kind, c.params, err)
		}
		ok, msg, err := inv.Check(context.Background(), env)
		if err != nil || ok != c.ok || (!ok && msg == "") {
			t.Errorf("%s %s: ok %v msg %q err %v, want ok %v", c.kind, c.params, ok, msg, err, c.ok)
		}
	}
	for _, bad := range []struct{ kind, params string }{
		{"required_payload_fields", `{}`},
		{"max_payload_bytes", `{"max_bytes":-1}`},
		{"expression", `{"expression":"1 +"}`},
		{"expression", `{"expression":"1 + 2"}`},
		{"unknown", `{}`},
	} {
		if _, err := CompileInvariant(&chp.InvariantDescriptor{ID: "i", Kind: bad.kind, Parameters: json.RawMessage(bad.params)}); err == nil {
			t.Errorf("%s %s compiled", bad.kind, bad.params)
		} else if strings.TrimSpace(err.Error()) == "" {
			t.Errorf("%s: empty error", bad.kind)
		}
	}
}
