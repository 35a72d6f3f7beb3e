package registry

import (
	"context"
	"fmt"

	"github.com/capmesh/capmesh/registry/internal/state"

	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/internal/pyjson"
)

const kindPolicy = "policy"

// PolicyManifest returns the network's signed policy manifest (the
// Genesis-Mesh PolicyManifest a node fetches from GET /policy right after
// it joins and verifies against the authority key), creating and storing
// it on first use so that it stays the same across restarts. capmesh
// restricts no ports or services through it: allowed_services is empty and
// allowed_ports is the reference's default.
func (n *Node) PolicyManifest(ctx context.Context) (map[string]any, error) {
	n.wmu.Lock()
	defer n.wmu.Unlock()
	if n.state.Trust.Policy != nil {
		return n.state.Trust.Policy, nil
	}
	rs, err := n.st.List(ctx, kindPolicy, n.cfg.Now())
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	for _, r := range rs {
		if r.Key != "active" {
			continue
		}
		v, err := pyjson.Decode(r.Value)
		if m, ok := v.(map[string]any); err == nil && ok {
			n.state.Trust.Policy = m
			return m, nil
		}
		n.log.Warn("registry: replacing an unreadable stored policy manifest", "err", err)
	}
	t := n.state.Trust
	p := map[string]any{
		"policy_id":          "policy-" + t.Network + "-v1",
		"issued_at":          descriptor.TimeOf(n.cfg.Now()).String(),
		"issued_by":          t.KeyID,
		"min_client_version": "0.1.0",
		"allowed_ports":      []any{443, 8443},
		"allowed_services":   []any{},
		"routing":            map[string]any{"preferred_transports": []any{"quic", "wireguard"}, "max_hops": 6},
	}
	p["signatures"] = []any{state.SigObject(state.Sign(p, t.Key, t.KeyID))}
	raw, err := pyjson.Marshal(p)
	if err != nil {
		return nil, err
	}
	if err := n.st.Apply(ctx, Op{Record: Record{Kind: kindPolicy, Key: "active", Value: raw}}); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	t.Policy = p
	return p, nil
}
