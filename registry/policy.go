package registry

import (
	"context"
	"fmt"

	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/internal/pyjson"
	"github.com/capmesh/capmesh/registry/internal/refusal"
)

const kindPolicy = "policy"

// PolicyManifest returns the network's signed policy manifest (the
// Genesis-Mesh PolicyManifest a node fetches from GET /policy after it
// joins), stored on first use (on a shared store conditionally: the loser
// of a race serves the winner's) to stay the same across restarts and
// nodes (state.Authority.NewPolicy).
func (n *Node) PolicyManifest(ctx context.Context) (map[string]any, error) {
	n.wmu.Lock()
	defer n.wmu.Unlock()
	if p, err := n.storedPolicy(ctx); p != nil || err != nil {
		return p, err
	}
	p := n.state.Trust.NewPolicy(descriptor.TimeOf(n.cfg.Now()).String())
	raw, err := pyjson.Marshal(p)
	if err != nil {
		return nil, err
	}
	if err := n.apply(ctx, Op{Record: Record{Kind: kindPolicy, Key: "active", Value: raw}}); err != nil {
		if refusal.Is(err, CodeWordConcurrentChange) {
			if w, rerr := n.storedPolicy(ctx); w != nil || rerr != nil {
				return w, rerr
			}
		}
		return nil, fmt.Errorf("registry: storing the policy manifest: %w", err)
	}
	n.state.Trust.Policy = p
	return p, nil
}

// storedPolicy is the cached or else the stored policy manifest (then
// cached); nil when the store holds no readable one. The caller holds wmu.
func (n *Node) storedPolicy(ctx context.Context) (map[string]any, error) {
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
		n.log.Warn("registry: unreadable stored policy manifest", "err", err)
	}
	return nil, nil
}
