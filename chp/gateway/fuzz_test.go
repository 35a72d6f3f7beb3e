package gateway

import (
	"bytes"
	"testing"

	"github.com/capmesh/capmesh/chp"
)

// FuzzPrepare: whatever a caller sends, prepare either rejects it or builds
// a forwarded body that parses to the same capability, invocation id and
// correlation id, with the mandate's bytes unchanged.
func FuzzPrepare(f *testing.F) {
	f.Add([]byte(`{"capability_id":"mesh.echo","invocation_id":"i","correlation":{"correlation_id":"c"}}`))
	f.Add([]byte(`{"capability_id":"mesh.echo","correlation_id":"c","mandate":{"a" : [1, 2]}}`))
	f.Add([]byte(`{"capability_id":"x","invocation_id":"","correlation":null,"mandate":"m"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		inv, err := prepare(body)
		if err != nil {
			return
		}
		env, err := chp.ParseEnvelope(inv.body)
		if err != nil {
			t.Fatalf("forwarded body %s does not parse: %v", inv.body, err)
		}
		if env.CapabilityID != inv.env.CapabilityID || env.InvocationID != inv.env.InvocationID ||
			env.Correlation.CorrelationID != inv.env.Correlation.CorrelationID {
			t.Fatalf("forwarded %s changed the envelope's ids (caller %s)", inv.body, body)
		}
		if !bytes.Equal(env.Mandate, inv.env.Mandate) {
			t.Fatalf("mandate %s forwarded as %s", inv.env.Mandate, env.Mandate)
		}
	})
}

// FuzzVerifyTaskBundle: any input is a verdict or, for a non-object, an
// error — never a panic, never valid without members.
func FuzzVerifyTaskBundle(f *testing.F) {
	f.Add([]byte(`{"kind":"task-bundle","correlation_id":"c","bundles":[],"task_root_hash":""}`))
	f.Add([]byte(`{"kind":"task-bundle","correlation_id":"c","bundles":[{"host_id":"h","root_hash":"r","events":[{"correlation":{"causation_id":"x"}}]}]}`))
	f.Add([]byte(`{"kind":"task-bundle","bundles":[1,"x",null],"aggregator":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := VerifyTaskBundle(data)
		if err != nil {
			return
		}
		if v.Valid && len(v.Hosts) == 0 {
			t.Fatalf("valid with no members: %s", data)
		}
	})
}
