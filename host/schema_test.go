package host_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/host"
)

// TestDeclaredSchemasPassThrough: a capability's declared schemas reach the
// CHP boundary exactly as written — no "$anchor" added, a root anchor of
// the author's own allowed — and the boundary enforces them.
func TestDeclaredSchemasPassThrough(t *testing.T) {
	h, err := host.New(host.Info{Name: "schemas", Version: "1.0.0", Domain: "s", License: "MIT"},
		&host.Config{Ephemeral: true, NoAnnounce: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	in := json.RawMessage(`{"$anchor":"mine","type":"object","required":["value"],"properties":{"value":{"type":"string"}}}`)
	out := json.RawMessage(`{"type":"object"}`)
	echo := func(_ context.Context, p json.RawMessage) (json.RawMessage, error) { return p, nil }
	if err := h.RegisterCHP("s.echo", echo, in, out); err != nil {
		t.Fatalf("RegisterCHP: %v", err)
	}
	d := h.Boundary().Describe()
	if len(d.Capabilities) != 1 {
		t.Fatalf("capabilities %+v", d.Capabilities)
	}
	if got := d.Capabilities[0]; string(got.InputSchema) != string(in) || string(got.OutputSchema) != string(out) {
		t.Errorf("emitted schemas %s / %s, want them as declared", got.InputSchema, got.OutputSchema)
	}
	for payload, want := range map[string]chp.Outcome{`{"value":"x"}`: chp.OutcomeSuccess, `{"value":1}`: chp.OutcomeDenied} {
		res, err := h.Boundary().Invoke(context.Background(), &chp.InvocationEnvelope{CapabilityID: "s.echo", Payload: json.RawMessage(payload)})
		if err != nil || res.Outcome != want {
			t.Errorf("%s: %+v %v, want %s", payload, res, err, want)
		}
	}
}
