package boundary

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary/governance"
)

// FixturePolicy and FixtureSafety are the host configuration of the upstream
// conformance fixture profile (conformance/FIXTURES.md): risk capped at
// medium, one guardrail that always blocks conformance.unsafe.
func FixturePolicy() *governance.PolicyConfig { return &governance.PolicyConfig{MaxRiskTier: "medium"} }

// FixtureSafety returns the fixture profile's safety evaluator.
func FixtureSafety() governance.SafetyEvaluator {
	return &governance.RuleSafety{Guardrails: []governance.Guardrail{{
		ID: "conformance-guardrail", CapabilityIDPattern: "conformance.unsafe",
		MaxRiskLevel: "critical", RequiresHumanFor: []string{"conformance.unsafe"},
	}}}
}

// RegisterFixtures registers the eight conformance fixture capabilities
// (all version 1.0.0) on b. Configure b with FixturePolicy and FixtureSafety.
func RegisterFixtures(b *Boundary) error {
	echo := func(_ context.Context, payload json.RawMessage) (json.RawMessage, error) {
		var p map[string]json.RawMessage
		if err := json.Unmarshal(payload, &p); err != nil {
			return nil, err
		}
		v := p["value"]
		if v == nil {
			v = json.RawMessage("null")
		}
		return json.Marshal(map[string]json.RawMessage{"echo": v})
	}
	one := int64(1)
	caps := []Capability{
		{Descriptor: chp.CapabilityDescriptor{ID: "conformance.echo", Description: "Echo a value.", Risk: "low"}, Handler: echo},
		{Descriptor: chp.CapabilityDescriptor{ID: "conformance.fail", Description: "Fail deterministically.", Risk: "low"},
			Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) {
				return nil, errors.New("expected failure")
			}},
		{Descriptor: chp.CapabilityDescriptor{ID: "conformance.guarded", Description: "Require payload.value.", Risk: "low",
			Invariants: []chp.InvariantDescriptor{{ID: "requires_value", Kind: "required_payload_fields", Enforcement: "host",
				FailureBehavior: "deny", Parameters: json.RawMessage(`{"fields":["value"]}`)}}}, Handler: echo},
		{Descriptor: chp.CapabilityDescriptor{ID: "conformance.approval", Description: "Approval-gated (every invocation requires approval).", Risk: "low",
			Autonomy: &chp.AutonomyProfile{Tier: "approval_required", RollbackPolicy: "none", SpendUnits: 1}}, Handler: echo},
		{Descriptor: chp.CapabilityDescriptor{ID: "conformance.budgeted", Description: "Budget-capped (action_limit=1 per correlation).", Risk: "low",
			Autonomy: &chp.AutonomyProfile{Tier: "supervised", ActionLimit: &one, RollbackPolicy: "none", SpendUnits: 1}}, Handler: echo},
		{Descriptor: chp.CapabilityDescriptor{ID: "conformance.risky", Description: "High-risk (exceeds the host's max_risk_tier).", Risk: "high"}, Handler: echo},
		{Descriptor: chp.CapabilityDescriptor{ID: "conformance.unsafe", Description: "Blocked by a safety guardrail.", Risk: "low"}, Handler: echo},
		{Descriptor: chp.CapabilityDescriptor{ID: "conformance.stream", Description: "Stream three deterministic chunks.", Risk: "low", Modes: []string{"sync", "stream"}},
			Stream: func(_ context.Context, _ json.RawMessage, send func(json.RawMessage) error) (json.RawMessage, error) {
				for _, s := range []string{`"s1"`, `"s2"`, `"s3"`} {
					if err := send(json.RawMessage(s)); err != nil {
						return nil, err
					}
				}
				return json.RawMessage(`{"chunks":3,"joined":"s1s2s3"}`), nil
			}},
	}
	for _, c := range caps {
		c.Descriptor.Version = "1.0.0"
		if err := b.Register(c); err != nil {
			return fmt.Errorf("fixture %s: %w", c.Descriptor.ID, err)
		}
	}
	return nil
}
