package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry/descriptor"
)

const srcRFC005 = "RFC-005 Capability Manifests §Verification rules"

// registryListing is what a registry served: descriptors (raw JSON) and,
// for ipc.list, each entry's trust verdict and expiry.
type registryListing struct {
	surface     string // "ipc.list" or "GET /agents"
	descriptors []json.RawMessage
	entries     []listedEntry
}

type listedEntry struct {
	Name      string                  `json:"primal_id"`
	ExpiresAt time.Time               `json:"expires_at"`
	Trust     *struct{ Trusted bool } `json:"trust"`
	Desc      json.RawMessage         `json:"descriptor"`
}

// listIPC asks a JSON-RPC registry for its live entries.
func listIPC(ctx context.Context, c jsonrpc.Caller) (*registryListing, error) {
	var out struct {
		Services []listedEntry `json:"services"`
	}
	if err := c.Call(ctx, "ipc.list", map[string]any{}, &out); err != nil {
		return nil, err
	}
	l := &registryListing{surface: "ipc.list", entries: out.Services}
	for _, e := range out.Services {
		if len(e.Desc) > 0 && string(e.Desc) != "null" {
			l.descriptors = append(l.descriptors, e.Desc)
		}
	}
	return l, nil
}

// listAgents asks a Genesis-Mesh NA registry (GET /agents).
func listAgents(ctx context.Context, h *httpCHP) (*registryListing, error) {
	raw, err := h.do(ctx, "GET", "/agents", nil)
	if err != nil {
		return nil, err
	}
	var out struct {
		Agents []json.RawMessage `json:"agents"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.Agents == nil {
		return nil, fmt.Errorf("GET /agents: want {\"agents\": [...]}")
	}
	return &registryListing{surface: "GET /agents", descriptors: out.Agents}, nil
}

// auditRegistry applies RFC-005's verification rules to what a registry
// serves as live providers.
func auditRegistry(l *registryListing, now time.Time) []Check {
	sig := Check{Suite: SuiteRFC005, ID: "R5.signature", Requirement: "every descriptor served verifies against its node_public_key", Source: srcRFC005 + " (MUST reject a descriptor whose signature does not verify)"}
	ttl := Check{Suite: SuiteRFC005, ID: "R5.ttl", Requirement: "every descriptor served as a live provider is within its TTL (expires_at after registered_at and after now)", Source: srcRFC005 + " (MUST check is_active)"}
	trust := Check{Suite: SuiteRFC005, ID: "R5.trust", Requirement: "discovery returns only trusted, unexpired providers (discovery never overrides trust)", Source: "RFC-005 §Normative requirements 4-6; §Verification rules (filter to trusted before ranking)"}

	var badSig, badTTL []string
	for i, raw := range l.descriptors {
		d, err := descriptor.Parse(raw)
		name := fmt.Sprintf("descriptor %d", i)
		if err != nil {
			badSig = append(badSig, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		name = fmt.Sprintf("%q", d.AgentID)
		if err := d.Verify(); err != nil {
			badSig = append(badSig, fmt.Sprintf("%s: %v", name, err))
		}
		if err := d.Live(now, descriptor.DefaultSkew); err != nil {
			badTTL = append(badTTL, fmt.Sprintf("%s: %v", name, err))
		}
	}
	switch {
	case len(l.descriptors) == 0:
		sig.Status, sig.Reason = Skip, "no signed descriptors served by "+l.surface
		ttl.Status, ttl.Reason = Skip, "no signed descriptors served by "+l.surface
	default:
		sig.Status, ttl.Status = Pass, Pass
		if len(badSig) > 0 {
			sig.Status, sig.Reason = Fail, strings.Join(badSig, "; ")
		}
		if len(badTTL) > 0 {
			ttl.Status, ttl.Reason = Fail, strings.Join(badTTL, "; ")
		}
	}
	var badTrust []string
	for _, e := range l.entries {
		switch {
		case e.Trust == nil:
			badTrust = append(badTrust, fmt.Sprintf("%q carries no trust verdict", e.Name))
		case !e.Trust.Trusted:
			badTrust = append(badTrust, fmt.Sprintf("%q is listed though untrusted", e.Name))
		case !e.ExpiresAt.IsZero() && !e.ExpiresAt.After(now):
			badTrust = append(badTrust, fmt.Sprintf("%q is listed though expired at %s", e.Name, e.ExpiresAt.Format(time.RFC3339)))
		}
	}
	switch {
	case l.entries == nil:
		trust.Status, trust.Reason = Skip, l.surface+" carries no trust verdicts"
	case len(badTrust) > 0:
		trust.Status, trust.Reason = Fail, strings.Join(badTrust, "; ")
	default:
		trust.Status = Pass
	}
	return []Check{sig, ttl, trust}
}
