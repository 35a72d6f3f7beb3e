package dashboard

import (
	"context"
	"net/http"
	"sort"
	"strings"

	"github.com/capmesh/capmesh/compose"
	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
)

// The composition graph: the registry's hosts (compose.FromRegistry: each
// entry's endpoint asked for its capabilities.list when reachable from
// here) on the left, the capability domains they provide or consume on
// the right; a solid edge provides, a dashed one consumes, and a domain
// some host needs but no live, trusted host provides is marked missing.
// It is drawn server side as inline SVG.

// builtinDomains are the protocol surfaces every host serves; drawing
// them would connect every host to the same boxes.
var builtinDomains = map[string]bool{"health": true, "identity": true, "capabilities": true, "capability": true,
	"chp": true, "primal": true, "lifecycle": true, "ipc": true, "registry": true}

// nodeCaller is a jsonrpc.Caller that calls the node as the request's caller.
type nodeCaller struct {
	d *Dashboard
	r *http.Request
}

func (c nodeCaller) Call(ctx context.Context, method string, params, result any) error {
	return c.d.call(ctx, c.r, method, params, result)
}
func (c nodeCaller) Notify(context.Context, string, any) error { return nil }
func (c nodeCaller) Close() error                              { return nil }

var _ jsonrpc.Caller = nodeCaller{}

type graphBox struct {
	ID, Label, Sub, Class string
	X, Y, W, H            int
}

type graphEdge struct {
	X1, Y1, X2, Y2 int
	Class, Title   string
}

type graphView struct {
	Width, Height int
	Hosts         []graphBox
	Domains       []graphBox
	Edges         []graphEdge
	Complete      bool
	Missing       []compose.Missing
	Ambiguous     []compose.Ambiguity
	Error         string
}

func domainOf(capability string) string {
	d, _, _ := strings.Cut(capability, ".")
	d, _, _ = strings.Cut(d, ":")
	return d
}

// layoutGraph places hosts and domains in two columns.
func layoutGraph(hosts []*compose.Host, a *compose.Analysis) *graphView {
	v := &graphView{Complete: a.Complete, Missing: a.Missing, Ambiguous: a.Ambiguous}
	missing := map[string]bool{}
	for _, m := range a.Missing {
		missing[domainOf(m.Capability)] = true
	}
	provides := map[string]map[string]bool{} // host → domains
	consumes := map[string]map[string]bool{}
	domains := map[string]bool{}
	for _, h := range hosts {
		provides[h.Name], consumes[h.Name] = map[string]bool{}, map[string]bool{}
		for _, m := range append(append([]string{}, h.Methods...), h.Tokens...) {
			if dom := domainOf(m); dom != "" && !builtinDomains[dom] {
				provides[h.Name][dom], domains[dom] = true, true
			}
		}
		for _, n := range h.Consumes {
			if dom := domainOf(n.Capability); dom != "" && !builtinDomains[dom] {
				consumes[h.Name][dom], domains[dom] = true, true
			}
		}
	}
	names := make([]string, 0, len(domains))
	for dom := range domains {
		names = append(names, dom)
	}
	sort.Strings(names)
	const hostX, domX, boxW, hostH, domH, gap = 20, 420, 220, 44, 30, 14
	ypos := map[string]int{}
	for i, dom := range names {
		b := graphBox{ID: "dom-" + dom, Label: dom, X: domX, Y: 20 + i*(domH+gap), W: boxW - 40, H: domH, Class: "domain"}
		if missing[dom] {
			b.Class += " missing"
			b.Sub = "missing"
		}
		ypos[dom] = b.Y + domH/2
		v.Domains = append(v.Domains, b)
	}
	for i, h := range hosts {
		b := graphBox{ID: "host-" + h.Name, Label: h.Name, X: hostX, Y: 20 + i*(hostH+gap), W: boxW, H: hostH, Class: "host"}
		switch {
		case !h.Live:
			b.Class, b.Sub = "host down", "not live"
		case !h.Trusted:
			b.Class, b.Sub = "host untrusted", "untrusted"
		default:
			b.Sub = strings.TrimSpace(h.Version + " " + h.Source)
		}
		v.Hosts = append(v.Hosts, b)
		cy := b.Y + hostH/2
		for _, dom := range names {
			if provides[h.Name][dom] {
				v.Edges = append(v.Edges, graphEdge{X1: hostX + boxW, Y1: cy, X2: domX, Y2: ypos[dom], Class: "provides", Title: h.Name + " provides " + dom})
			}
			if consumes[h.Name][dom] {
				v.Edges = append(v.Edges, graphEdge{X1: hostX + boxW, Y1: cy, X2: domX, Y2: ypos[dom], Class: "consumes", Title: h.Name + " consumes " + dom})
			}
		}
	}
	v.Width = domX + boxW
	v.Height = 40 + max(len(hosts)*(hostH+gap), len(names)*(domH+gap))
	return v
}

func (d *Dashboard) composePage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	if !d.cfg.NodeOnThisMachine {
		ctx = endpoint.RegistryAnswers(ctx, d.cfg.Node()) // another machine's node lists its sockets
	}
	hosts, err := compose.FromRegistry(ctx, nodeCaller{d, r}, nil)
	if err != nil {
		d.fail(w, r, http.StatusBadGateway, err)
		return
	}
	c := &compose.Composition{Name: "registry"}
	for _, h := range hosts {
		c.Add(h)
	}
	sort.SliceStable(c.Hosts, func(i, j int) bool { return c.Hosts[i].Name < c.Hosts[j].Name })
	d.render(w, r, http.StatusOK, "compose", "Composition", layoutGraph(c.Hosts, compose.Analyze(c)))
}
