// Package governance holds the rules a CHP boundary applies to an
// invocation besides its descriptor: the host policy (pipeline gate 6), the
// host-enforced invariants with their CEL expressions (gate 7), the safety
// evaluator (gate 10) and key scopes. Package boundary runs them in its
// gate pipeline and records what they decide as evidence.
package governance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/capmesh/capmesh/chp"
)

// PolicyConfig is the host policy applied at pipeline gate 6
// (chp-invocation-pipeline.md §4). The zero value blocks nothing.
type PolicyConfig struct {
	// AllowedCapabilityIDs, when non-empty, is the only set that may run.
	AllowedCapabilityIDs []string
	// BlockCapabilityIDs never run.
	BlockCapabilityIDs []string
	// MaxRiskTier caps the risk tier (low < medium < high < critical); a
	// capability without a tier counts as medium. Empty = no cap.
	MaxRiskTier string
	// BlockPatterns block an invocation whose payload matches: a pattern
	// "re:<regexp>" is a case-insensitive regular expression, anything else a
	// case-insensitive substring of the payload JSON.
	BlockPatterns []string
	// AuditOnly records the decision but never blocks.
	AuditOnly bool
	// Version names the policy in decision records.
	Version string

	patterns []*regexp.Regexp
}

var riskOrder = map[string]int{"low": 0, "medium": 1, "high": 2, "critical": 3}

// ValidRisk reports whether tier is a risk tier: low, medium, high or
// critical.
func ValidRisk(tier string) bool {
	_, ok := riskOrder[tier]
	return ok
}

func riskRank(tier string) int {
	if r, ok := riskOrder[tier]; ok {
		return r
	}
	return 1 // unknown or absent counts as medium
}

// Compile validates the policy and compiles its block patterns; a policy
// decides only once compiled.
func (p *PolicyConfig) Compile() error {
	p.patterns = make([]*regexp.Regexp, len(p.BlockPatterns))
	for i, pat := range p.BlockPatterns {
		expr := regexp.QuoteMeta(pat)
		if s, ok := strings.CutPrefix(pat, "re:"); ok {
			expr = s
		}
		re, err := regexp.Compile("(?i)" + expr)
		if err != nil {
			return fmt.Errorf("policy block pattern %q: %w", pat, err)
		}
		p.patterns[i] = re
	}
	if p.MaxRiskTier != "" {
		if _, ok := riskOrder[p.MaxRiskTier]; !ok {
			return fmt.Errorf("policy max_risk_tier %q: want low, medium, high or critical", p.MaxRiskTier)
		}
	}
	return nil
}

// Decide returns the matched rule and explanation of the first blocking
// rule, or "" when the policy allows.
func (p *PolicyConfig) Decide(d *chp.CapabilityDescriptor, payload json.RawMessage) (rule, why string) {
	if len(p.AllowedCapabilityIDs) > 0 && !slices.Contains(p.AllowedCapabilityIDs, d.ID) {
		return "allowed_capability_ids", fmt.Sprintf("capability %q is not in the allowlist", d.ID)
	}
	if slices.Contains(p.BlockCapabilityIDs, d.ID) {
		return "block_capability_ids:" + d.ID, fmt.Sprintf("capability %q is blocked", d.ID)
	}
	if p.MaxRiskTier != "" && riskRank(d.Risk) > riskRank(p.MaxRiskTier) {
		risk := d.Risk
		if risk == "" {
			risk = "medium"
		}
		return "max_risk_tier:" + p.MaxRiskTier, fmt.Sprintf("capability risk %q exceeds max_risk_tier %q", risk, p.MaxRiskTier)
	}
	for i, re := range p.patterns {
		if re.Match(payload) {
			return "block_patterns:" + p.BlockPatterns[i], "payload matches a blocked pattern"
		}
	}
	return "", ""
}

// SafetyVerdict is a safety evaluator's assessment of one invocation.
// Score is a fixed-precision string: evidence must not carry floats
// (chp-v0.2.md §2 rule 6).
type SafetyVerdict struct {
	Level     string
	Score     string
	Approved  bool
	Reason    string
	Evaluated []string
}

// SafetyEvaluator assesses every invocation that reaches pipeline gate 10.
type SafetyEvaluator interface {
	Assess(ctx context.Context, d *chp.CapabilityDescriptor, env *chp.InvocationEnvelope) SafetyVerdict
}

// Guardrail is one rule of a RuleSafety evaluator.
type Guardrail struct {
	ID string
	// CapabilityIDPattern selects the capabilities the guardrail looks at:
	// an exact id, a trailing-* prefix, or "*" for all.
	CapabilityIDPattern string
	// RequiresHumanFor lists capability ids the guardrail always blocks
	// (they need a human decision).
	RequiresHumanFor []string
	// MaxRiskLevel blocks capabilities whose risk tier orders above it.
	MaxRiskLevel string
}

// RuleSafety is a rule-based SafetyEvaluator: the first guardrail that
// matches a capability and blocks it decides.
type RuleSafety struct {
	Guardrails []Guardrail
}

func scopeMatch(pattern, id string) bool {
	if pattern == "*" || pattern == id {
		return true
	}
	p, ok := strings.CutSuffix(pattern, "*")
	return ok && strings.HasPrefix(id, p)
}

// Assess implements SafetyEvaluator.
func (r *RuleSafety) Assess(_ context.Context, d *chp.CapabilityDescriptor, _ *chp.InvocationEnvelope) SafetyVerdict {
	level := d.Risk
	if level == "" {
		level = "low"
	}
	v := SafetyVerdict{Level: level, Score: fmt.Sprintf("%.3f", float64(riskRank(level))/3), Approved: true}
	for _, g := range r.Guardrails {
		if !scopeMatch(g.CapabilityIDPattern, d.ID) {
			continue
		}
		v.Evaluated = append(v.Evaluated, g.ID)
		switch {
		case slices.Contains(g.RequiresHumanFor, d.ID):
			v.Approved, v.Reason = false, fmt.Sprintf("guardrail %q: %q requires human approval", g.ID, d.ID)
		case g.MaxRiskLevel != "" && riskRank(level) > riskRank(g.MaxRiskLevel):
			v.Approved, v.Reason = false, fmt.Sprintf("guardrail %q: risk %q exceeds %q", g.ID, level, g.MaxRiskLevel)
		}
		if !v.Approved {
			return v
		}
	}
	return v
}

// ScopeAllows reports whether a key scope (exact ids or trailing-* prefixes,
// chp-http-binding.md §2) admits capabilityID. A nil scope admits all.
func ScopeAllows(scope []string, capabilityID string) bool {
	if scope == nil {
		return true
	}
	for _, s := range scope {
		if s != "*" && scopeMatch(s, capabilityID) {
			return true
		}
		if s == "*" {
			return true
		}
	}
	return false
}

// payloadHasField reports whether the payload object has a non-null member.
func payloadHasField(payload map[string]json.RawMessage, field string) bool {
	v, ok := payload[field]
	return ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}
