package compose

import (
	"fmt"
	"sort"
	"strings"

	"github.com/capmesh/capmesh/wire"
)

// Missing is a need no live, trusted host meets.
type Missing struct {
	Capability string `json:"capability"`
	// NeededBy lists the node ids that need it.
	NeededBy []string `json:"needed_by"`
	// Required is false when every node needing it can do without.
	Required bool `json:"required"`
	// Reason says why it is unmet: nobody provides it, or its providers
	// are not live or not trusted.
	Reason string `json:"reason"`
}

// Ambiguity is a capability several usable hosts provide.
type Ambiguity struct {
	Capability string   `json:"capability"`
	Providers  []string `json:"providers"`
	// Chosen is the provider routing and planning use: the cheapest.
	Chosen string `json:"chosen"`
}

// Cycle is a dependency cycle. Kind is "start-up" (declared depends_on:
// the graph cannot be ordered), "consumption" (hosts consume each other:
// they can still start, standalone first, but none is complete alone) or
// "operation" (operation_dependencies loop: no plan can satisfy them).
type Cycle struct {
	Kind  string   `json:"kind"`
	Nodes []string `json:"nodes"`
}

// Edge is one arrow of the start-up graph: From must start after To.
type Edge struct {
	From, To string
	// Kind is "depends_on" or "consumes"; Capability names what is
	// consumed.
	Kind       string
	Capability string
}

// Analysis is what Analyze finds.
type Analysis struct {
	// Complete is true when every required need has a live, trusted
	// provider.
	Complete  bool        `json:"complete"`
	Missing   []Missing   `json:"missing"`
	Surface   []string    `json:"surface"`
	Ambiguous []Ambiguity `json:"ambiguous"`
	Cycles    []Cycle     `json:"cycles"`
	// Waves is the start-up order: the nodes of wave i depend only on
	// nodes of earlier waves (the members of a consumption cycle share a
	// wave).
	Waves [][]string `json:"waves"`
	// Problems are structural errors (a depends_on naming no node).
	Problems []string `json:"problems"`
	Edges    []Edge   `json:"-"`
}

// OK reports whether the composition can be deployed: complete, without
// start-up or operation cycles, without structural problems.
func (a *Analysis) OK() bool {
	if !a.Complete || len(a.Problems) > 0 {
		return false
	}
	for _, c := range a.Cycles {
		if c.Kind != "consumption" {
			return false
		}
	}
	return true
}

// builtins are the methods every host answers; several providers of them
// are not an ambiguity.
func builtin(m string) bool {
	for _, p := range []string{"health.", "chp.", "capabilities.", "capability.list", "identity.get", "lifecycle.", "auth.", "tools.", "rpc.", "primal."} {
		if strings.HasPrefix(m, p) || m == p {
			return true
		}
	}
	return false
}

// usable reports whether h can serve: live and trusted.
func (h *Host) usable() bool { return h.Live && h.Trusted }

// Providers returns the hosts that provide capability, usable ones first,
// each group by name.
func (c *Composition) Providers(capability string) (usable, unusable []*Host) {
	for _, h := range c.Hosts {
		if h.provides(capability) {
			if h.usable() {
				usable = append(usable, h)
			} else {
				unusable = append(unusable, h)
			}
		}
	}
	return usable, unusable
}

// choose picks the cheapest usable provider of capability (by the cost of
// the method alone: latency, then CPU class, then name).
func (c *Composition) choose(capability string) *Host {
	usable, _ := c.Providers(capability)
	if len(usable) == 0 {
		return nil
	}
	best := usable[0]
	for _, h := range usable[1:] {
		if lessCost(h.cost(capability), best.cost(capability)) || (h.cost(capability) == best.cost(capability) && h.Name < best.Name) {
			best = h
		}
	}
	return best
}

// Analyze checks completeness, computes the surface, ambiguities, cycles
// and start-up waves.
func Analyze(c *Composition) *Analysis {
	a := &Analysis{Missing: []Missing{}, Surface: []string{}, Ambiguous: []Ambiguity{}, Cycles: []Cycle{}, Waves: [][]string{}, Problems: []string{}}
	ids := map[string]bool{}
	for _, n := range c.Nodes {
		if ids[n.ID] {
			a.Problems = append(a.Problems, fmt.Sprintf("node id %q is used twice", n.ID))
		}
		ids[n.ID] = true
	}
	wants, order := consumption(c)
	a.completeness(c, wants, order)
	a.surface(c, wants)
	a.startup(c, ids)
	a.operationCycles(c)
	return a
}

// want is what the composition asks of one capability: the nodes that
// need it, and whether any of them requires it.
type want struct {
	by       []string
	required bool
}

// consumption collects what the nodes need, by capability, and the
// capabilities in the order first needed.
func consumption(c *Composition) (map[string]*want, []string) {
	wants := map[string]*want{}
	var order []string
	for _, n := range c.Nodes {
		for _, nd := range n.Needs {
			w := wants[nd.Capability]
			if w == nil {
				w = &want{}
				wants[nd.Capability] = w
				order = append(order, nd.Capability)
			}
			if !contains(w.by, n.ID) {
				w.by = append(w.by, n.ID)
			}
			w.required = w.required || (nd.Required && !n.Optional)
		}
	}
	return wants, order
}

// completeness finds the needed capabilities and named hosts nobody
// usable provides, and the needed capabilities several provide.
func (a *Analysis) completeness(c *Composition, wants map[string]*want, order []string) {
	a.Complete = true
	for _, capability := range order {
		w := wants[capability]
		usable, unusable := c.Providers(capability)
		if len(usable) > 0 {
			if len(usable) > 1 {
				var names []string
				for _, h := range usable {
					names = append(names, h.Name)
				}
				a.Ambiguous = append(a.Ambiguous, Ambiguity{Capability: capability, Providers: sorted(names), Chosen: c.choose(capability).Name})
			}
			continue
		}
		m := Missing{Capability: capability, NeededBy: w.by, Required: w.required, Reason: missingReason(capability, unusable)}
		a.Missing = append(a.Missing, m)
		if m.Required {
			a.Complete = false
		}
	}
	for _, n := range c.Nodes {
		if n.Target != "" && c.Host(n.Target) == nil {
			a.Missing = append(a.Missing, Missing{Capability: "host " + n.Target, NeededBy: []string{n.ID}, Required: !n.Optional,
				Reason: fmt.Sprintf("node %s addresses host %q by name, and the composition has none", n.ID, n.Target)})
			if !n.Optional {
				a.Complete = false
			}
		}
	}
}

// missingReason says why a needed capability has no usable provider.
func missingReason(capability string, unusable []*Host) string {
	switch {
	case len(unusable) > 0:
		var why []string
		for _, h := range unusable {
			s := "not live"
			if h.Live {
				s = "not trusted"
			}
			why = append(why, h.Name+" provides it but is "+s)
		}
		return strings.Join(why, "; ")
	case wire.ValidateMethodName(capability) != nil && strings.ContainsAny(capability, "-_") && !strings.Contains(capability, "."):
		return "no host provides it (it is a token, not a method name, so only a host advertising that token matches)"
	}
	return "no host provides it"
}

// surface computes every usable method minus everything consumed, and
// the methods nobody needs that several hosts provide.
func (a *Analysis) surface(c *Composition, wants map[string]*want) {
	providers := map[string][]string{}
	for _, h := range c.Hosts {
		if !h.usable() {
			continue
		}
		for _, m := range h.Methods {
			if wants[m] == nil {
				a.Surface = union(a.Surface, []string{m})
			}
			providers[m] = append(providers[m], h.Name)
		}
	}
	sort.Strings(a.Surface)
	for m, ps := range providers {
		if len(ps) > 1 && !builtin(m) && wants[m] == nil {
			a.Ambiguous = append(a.Ambiguous, Ambiguity{Capability: m, Providers: sorted(ps), Chosen: c.choose(m).Name})
		}
	}
	sort.Slice(a.Ambiguous, func(i, j int) bool { return a.Ambiguous[i].Capability < a.Ambiguous[j].Capability })
}

// startup builds the start-up graph, finds its cycles and orders it in
// waves.
func (a *Analysis) startup(c *Composition, ids map[string]bool) {
	a.edges(c, ids)
	var nodes []string
	for _, n := range c.Nodes {
		nodes = append(nodes, n.ID)
	}
	declared := map[string][]string{}
	all := map[string][]string{}
	for _, e := range a.Edges {
		all[e.From] = union(all[e.From], []string{e.To})
		if e.Kind == "depends_on" {
			declared[e.From] = union(declared[e.From], []string{e.To})
		}
	}
	startup := map[string]bool{}
	for _, scc := range cycles(nodes, declared) {
		a.Cycles = append(a.Cycles, Cycle{Kind: "start-up", Nodes: scc})
		for _, n := range scc {
			startup[n] = true
		}
	}
	sccs := components(nodes, all)
	for _, scc := range sccs {
		if isCycle(scc, all) && !startup[scc[0]] {
			a.Cycles = append(a.Cycles, Cycle{Kind: "consumption", Nodes: scc})
		}
	}
	a.Waves = waves(sccs, all)
}

// edges adds the start-up graph's edges: declared dependencies, and the
// consumption of a capability or a named host another node provides.
func (a *Analysis) edges(c *Composition, ids map[string]bool) {
	for _, n := range c.Nodes {
		for _, d := range n.DependsOn {
			if !ids[d] {
				a.Problems = append(a.Problems, fmt.Sprintf("node %s depends on %q, which is not a node", n.ID, d))
				continue
			}
			a.Edges = append(a.Edges, Edge{From: n.ID, To: d, Kind: "depends_on"})
		}
		for _, nd := range n.Needs {
			p := c.choose(nd.Capability)
			if p == nil {
				continue
			}
			if pn := c.nodeOf(p.Name); pn != nil && pn.ID != n.ID {
				a.Edges = append(a.Edges, Edge{From: n.ID, To: pn.ID, Kind: "consumes", Capability: nd.Capability})
			}
		}
		if n.Target != "" {
			if pn := c.nodeOf(n.Target); pn != nil && pn.ID != n.ID && !contains(n.DependsOn, pn.ID) {
				a.Edges = append(a.Edges, Edge{From: n.ID, To: pn.ID, Kind: "consumes", Capability: "host " + n.Target})
			}
		}
	}
}

// operationCycles finds the cycles of operation_dependencies across every
// host.
func (a *Analysis) operationCycles(c *Composition) {
	var methods []string
	deps := map[string][]string{}
	for _, h := range c.Hosts {
		for m, pre := range h.Deps {
			methods = union(methods, append([]string{m}, pre...))
			deps[m] = union(deps[m], pre)
		}
	}
	sort.Strings(methods)
	for _, scc := range cycles(methods, deps) {
		a.Cycles = append(a.Cycles, Cycle{Kind: "operation", Nodes: scc})
	}
}

// components returns the strongly connected components of the graph
// (Tarjan), each sorted, in reverse topological order (dependencies
// first).
func components(nodes []string, edges map[string][]string) [][]string {
	index := map[string]int{}
	low := map[string]int{}
	on := map[string]bool{}
	var stack []string
	var out [][]string
	next := 0
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		on[v] = true
		for _, w := range edges[v] {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var scc []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				on[w] = false
				scc = append(scc, w)
				if w == v {
					break
				}
			}
			sort.Strings(scc)
			out = append(out, scc)
		}
	}
	for _, v := range nodes {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	return out
}

func isCycle(scc []string, edges map[string][]string) bool {
	return len(scc) > 1 || contains(edges[scc[0]], scc[0])
}

// cycles returns the components that are cycles.
func cycles(nodes []string, edges map[string][]string) [][]string {
	var out [][]string
	for _, scc := range components(nodes, edges) {
		if isCycle(scc, edges) {
			out = append(out, scc)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// waves layers the condensation: a component's wave is one more than the
// latest wave it depends on.
func waves(sccs [][]string, edges map[string][]string) [][]string {
	comp := map[string]int{}
	for i, scc := range sccs {
		for _, v := range scc {
			comp[v] = i
		}
	}
	level := make([]int, len(sccs))
	// Tarjan emits components dependencies-first, so one pass suffices.
	for i, scc := range sccs {
		for _, v := range scc {
			for _, w := range edges[v] {
				if j := comp[w]; j != i && level[j]+1 > level[i] {
					level[i] = level[j] + 1
				}
			}
		}
	}
	var out [][]string
	for i, scc := range sccs {
		for len(out) <= level[i] {
			out = append(out, nil)
		}
		out[level[i]] = append(out[level[i]], scc...)
	}
	for _, w := range out {
		sort.Strings(w)
	}
	return out
}
