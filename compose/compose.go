// Package compose decides, before anything is deployed, whether a set of
// capability hosts forms a complete composition, and plans execution on it,
// from what the hosts say about themselves in the Capability Wire
// Standard's Level 3 fields: consumed_capabilities, cost_estimates and
// operation_dependencies.
//
// Data flow:
//
//	live sockets / registry ─┐
//	deploy-graph TOML ───────┼─▶ Composition{Hosts, Nodes} ──Analyze──▶ Analysis
//	capabilities.list JSON ──┘                               │             (completeness, surface,
//	                                                         │              ambiguity, cycles, waves)
//	                                                         └─Plan(goal)─▶ Plan (prerequisite chain,
//	                                                                              cheapest providers,
//	                                                                              summed cost)
//
// Hosts provide methods (and capability tokens: group types, graph
// capability names); Nodes are the vertices of the start-up graph: one per
// live host, or one per deploy-graph node (a node that launches a primal, or
// a step that calls a capability). A node needs capabilities; a need is met
// by a live, trusted host that provides it. Analyze draws an edge from each
// node to the node that launches the provider of each of its needs, plus
// every declared depends_on, and orders the nodes into start-up waves.
package compose

import (
	"sort"
	"strings"

	"github.com/capmesh/capmesh/wire"
)

// Host is one capability provider (and consumer).
type Host struct {
	// Name is the primal name.
	Name string `json:"name"`
	// Endpoint is where it was reached ("" when declared only).
	Endpoint string `json:"endpoint,omitempty"`
	// Source says where the host came from: live, registry, graph or
	// capabilities (a capabilities.list file).
	Source  string `json:"source"`
	Version string `json:"version,omitempty"`
	// Live is false for a host that was expected but did not answer.
	Live bool `json:"live"`
	// Trusted is false for a host the registry's trust policy rejects.
	Trusted bool `json:"trusted"`
	// Optional marks a host a deploy graph does not require.
	Optional bool `json:"optional,omitempty"`
	// Methods are the callable methods; Tokens the other capability names
	// it answers to (group types, graph capability tokens).
	Methods []string `json:"methods"`
	Tokens  []string `json:"tokens,omitempty"`
	// Consumes is consumed_capabilities.
	Consumes []Need `json:"consumes,omitempty"`
	// Costs is cost_estimates (per method or per domain).
	Costs map[string]wire.CostEstimate `json:"cost_estimates,omitempty"`
	// Deps is operation_dependencies: method → prerequisite methods.
	Deps map[string][]string `json:"operation_dependencies,omitempty"`
}

// Need is one capability a node needs from some host.
type Need struct {
	Capability string `json:"capability"`
	// Required is false for an optional need (NestGate's {required:
	// false}, a graph step with fallback "skip").
	Required bool   `json:"required"`
	Reason   string `json:"reason,omitempty"`
}

// Node is a vertex of the start-up graph.
type Node struct {
	// ID is unique in the composition.
	ID string `json:"id"`
	// Host is the host this node launches or declares ("" for a step).
	Host string `json:"host,omitempty"`
	// Target is the host a step addresses by name (rpc_call,
	// health_check), which must exist.
	Target string `json:"target,omitempty"`
	// Needs are the capabilities the node calls.
	Needs []Need `json:"needs,omitempty"`
	// DependsOn are node ids that must come first (declared).
	DependsOn []string `json:"depends_on,omitempty"`
	// Optional marks a node that may fail without failing the graph.
	Optional bool `json:"optional,omitempty"`
}

// Composition is a set of hosts and the start-up graph over them.
type Composition struct {
	Name  string  `json:"name,omitempty"`
	Hosts []*Host `json:"hosts"`
	Nodes []*Node `json:"nodes"`
}

// Host returns the host called name, or nil.
func (c *Composition) Host(name string) *Host {
	for _, h := range c.Hosts {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// Add merges h into c: a host already present (same name) gains h's
// methods, tokens, needs, costs and dependencies, so that a deploy graph
// and the hosts' own capabilities.list answers can be combined. A host
// with no node yet gets one (id = its name).
func (c *Composition) Add(h *Host) *Host {
	if old := c.Host(h.Name); old != nil {
		old.Methods = union(old.Methods, h.Methods)
		old.Tokens = union(old.Tokens, h.Tokens)
		for _, n := range h.Consumes {
			if !hasNeed(old.Consumes, n.Capability) {
				old.Consumes = append(old.Consumes, n)
			}
		}
		if old.Costs == nil && len(h.Costs) > 0 {
			old.Costs = map[string]wire.CostEstimate{}
		}
		for k, v := range h.Costs {
			old.Costs[k] = v
		}
		if old.Deps == nil && len(h.Deps) > 0 {
			old.Deps = map[string][]string{}
		}
		for k, v := range h.Deps {
			old.Deps[k] = union(old.Deps[k], v)
		}
		if h.Endpoint != "" {
			old.Endpoint, old.Live, old.Trusted = h.Endpoint, h.Live, h.Trusted
		}
		if old.Version == "" {
			old.Version = h.Version
		}
		if n := c.nodeOf(h.Name); n != nil {
			n.Needs = mergeNeeds(n.Needs, h.Consumes)
		}
		return old
	}
	c.Hosts = append(c.Hosts, h)
	if c.nodeOf(h.Name) == nil {
		c.Nodes = append(c.Nodes, &Node{ID: h.Name, Host: h.Name, Needs: append([]Need(nil), h.Consumes...), Optional: h.Optional})
	}
	return h
}

// nodeOf is the node that launches (or stands for) host name: the first
// node whose Host is name.
func (c *Composition) nodeOf(name string) *Node {
	for _, n := range c.Nodes {
		if n.Host == name {
			return n
		}
	}
	return nil
}

// FromCapabilities turns a parsed capabilities.list result into a Host.
func FromCapabilities(name string, caps *wire.Capabilities) *Host {
	h := &Host{Name: name, Version: caps.Version, Live: true, Trusted: true, Source: "capabilities"}
	if caps.Primal != "" {
		h.Name = caps.Primal
	}
	h.Methods = union(nil, caps.Methods)
	for _, g := range caps.Groups {
		h.Tokens = union(h.Tokens, []string{g.Type})
		h.Methods = union(h.Methods, g.Methods)
	}
	for _, cc := range caps.Consumed {
		h.Consumes = append(h.Consumes, Need{Capability: cc.Name, Required: cc.Required == nil || *cc.Required, Reason: cc.Reason})
	}
	if len(caps.CostEstimates) > 0 {
		h.Costs = caps.CostEstimates
	}
	if len(caps.OperationDependencies) > 0 {
		h.Deps = caps.OperationDependencies
	}
	return h
}

// provides reports whether h answers to capability: one of its methods or
// tokens exactly, or, for a bare token without a dot ("crypto"), the domain
// of one of its methods. A dotted name is matched exactly: crypto.sign is
// not met by crypto.sign_ed25519.
func (h *Host) provides(capability string) bool {
	if contains(h.Methods, capability) || contains(h.Tokens, capability) {
		return true
	}
	if !strings.Contains(capability, ".") {
		for _, m := range h.Methods {
			if strings.HasPrefix(m, capability+".") {
				return true
			}
		}
	}
	return false
}

func union(a, b []string) []string {
	seen := make(map[string]bool, len(a)+len(b))
	out := make([]string, 0, len(a)+len(b))
	for _, s := range append(append([]string(nil), a...), b...) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func hasNeed(ns []Need, c string) bool {
	for _, n := range ns {
		if n.Capability == c {
			return true
		}
	}
	return false
}

func mergeNeeds(a, b []Need) []Need {
	for _, n := range b {
		if !hasNeed(a, n.Capability) {
			a = append(a, n)
		}
	}
	return a
}

func sorted(xs []string) []string {
	out := append([]string(nil), xs...)
	sort.Strings(out)
	return out
}
