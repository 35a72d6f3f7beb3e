package compose

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// WriteText writes the analysis as a short report with a tree of the
// start-up waves: each node, the host it runs, and whom it consumes from.
func WriteText(w io.Writer, c *Composition, a *Analysis) error {
	var b strings.Builder
	name := c.Name
	if name == "" {
		name = "composition"
	}
	fmt.Fprintf(&b, "%s: %d hosts, %d nodes\n", name, len(c.Hosts), len(c.Nodes))
	req := 0
	for _, m := range a.Missing {
		if m.Required {
			req++
		}
	}
	if a.Complete {
		b.WriteString("complete: every consumed capability has a live, trusted provider\n")
	} else {
		fmt.Fprintf(&b, "INCOMPLETE: %d required capabilities have no live, trusted provider\n", req)
	}
	for _, m := range a.Missing {
		mark := "✗"
		if !m.Required {
			mark = "!"
		}
		fmt.Fprintf(&b, "  %s %s  needed by %s: %s\n", mark, m.Capability, strings.Join(m.NeededBy, ", "), m.Reason)
	}
	for _, p := range a.Problems {
		fmt.Fprintf(&b, "  ✗ %s\n", p)
	}
	for _, cy := range a.Cycles {
		fmt.Fprintf(&b, "%s cycle: %s\n", cy.Kind, strings.Join(append(cy.Nodes, cy.Nodes[0]), " → "))
	}
	for _, am := range a.Ambiguous {
		fmt.Fprintf(&b, "ambiguous: %s is provided by %s (chosen: %s)\n", am.Capability, strings.Join(am.Providers, ", "), am.Chosen)
	}
	fmt.Fprintf(&b, "surface (%d methods): %s\n", len(a.Surface), abbreviate(a.Surface, 12))

	out := map[string][]Edge{}
	for _, e := range a.Edges {
		out[e.From] = append(out[e.From], e)
	}
	byID := map[string]*Node{}
	for _, n := range c.Nodes {
		byID[n.ID] = n
	}
	for i, wave := range a.Waves {
		fmt.Fprintf(&b, "wave %d\n", i+1)
		for j, id := range wave {
			branch, cont := "├─ ", "│  "
			if j == len(wave)-1 {
				branch, cont = "└─ ", "   "
			}
			n := byID[id]
			label := id
			if n != nil && n.Host != "" && n.Host != id {
				label += " (" + n.Host + ")"
			}
			if n != nil && n.Optional {
				label += " [optional]"
			}
			b.WriteString("  " + branch + label + "\n")
			for _, e := range out[id] {
				if e.Kind == "depends_on" {
					fmt.Fprintf(&b, "  %s   after %s\n", cont, e.To)
				} else {
					fmt.Fprintf(&b, "  %s   uses %s from %s\n", cont, e.Capability, e.To)
				}
			}
			if n != nil {
				for _, nd := range n.Needs {
					for _, m := range a.Missing {
						if m.Capability == nd.Capability {
							fmt.Fprintf(&b, "  %s   needs %s: MISSING\n", cont, nd.Capability)
						}
					}
				}
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WritePlan writes a plan as numbered steps and the total.
func WritePlan(w io.Writer, p *Plan) error {
	var b strings.Builder
	fmt.Fprintf(&b, "plan for %s\n", p.Goal)
	for i, s := range p.Steps {
		fmt.Fprintf(&b, "  %d. %s on %s (%s)", i+1, s.Method, s.Provider, s.Cost)
		if len(s.After) > 0 {
			fmt.Fprintf(&b, " after %s", strings.Join(s.After, ", "))
		}
		if len(s.Alternatives) > 0 {
			fmt.Fprintf(&b, "; cheaper than %s", strings.Join(s.Alternatives, ", "))
		}
		b.WriteString("\n")
	}
	t := p.Total
	if t.Known {
		fmt.Fprintf(&b, "  total: %s\n", t)
	} else {
		t.Known = true
		fmt.Fprintf(&b, "  total: at least %s (no estimate for %s)\n", t, strings.Join(p.Unknown, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteDOT writes the start-up graph in Graphviz DOT: declared
// dependencies solid, consumption dashed and labelled, missing
// capabilities as red nodes.
func WriteDOT(w io.Writer, c *Composition, a *Analysis) error {
	var b strings.Builder
	name := c.Name
	if name == "" {
		name = "composition"
	}
	fmt.Fprintf(&b, "digraph %s {\n  rankdir=LR;\n  node [shape=box, style=rounded];\n", strconv.Quote(name))
	for _, n := range c.Nodes {
		label := n.ID
		if n.Host != "" && n.Host != n.ID {
			label += "\\n(" + n.Host + ")"
		}
		attrs := fmt.Sprintf("label=%s", dotQuote(label))
		if n.Optional {
			attrs += ", style=\"rounded,dashed\""
		}
		fmt.Fprintf(&b, "  %s [%s];\n", strconv.Quote(n.ID), attrs)
	}
	for i, m := range a.Missing {
		fmt.Fprintf(&b, "  %s [label=%s, color=red, fontcolor=red];\n", strconv.Quote(fmt.Sprintf("missing-%d", i)), dotQuote("missing: "+m.Capability))
		for _, by := range m.NeededBy {
			fmt.Fprintf(&b, "  %s -> %s [color=red];\n", strconv.Quote(by), strconv.Quote(fmt.Sprintf("missing-%d", i)))
		}
	}
	for _, e := range a.Edges {
		if e.Kind == "depends_on" {
			fmt.Fprintf(&b, "  %s -> %s;\n", strconv.Quote(e.From), strconv.Quote(e.To))
		} else {
			fmt.Fprintf(&b, "  %s -> %s [style=dashed, label=%s];\n", strconv.Quote(e.From), strconv.Quote(e.To), dotQuote(e.Capability))
		}
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func dotQuote(s string) string {
	return `"` + strings.NewReplacer(`"`, `\"`).Replace(s) + `"`
}

// WriteMermaid writes the start-up graph as a Mermaid flowchart.
func WriteMermaid(w io.Writer, c *Composition, a *Analysis) error {
	var b strings.Builder
	b.WriteString("flowchart LR\n")
	ids := map[string]string{}
	for i, n := range c.Nodes {
		ids[n.ID] = "n" + strconv.Itoa(i)
		label := mermaidText(n.ID)
		if n.Host != "" && n.Host != n.ID {
			label += "<br/>(" + mermaidText(n.Host) + ")"
		}
		fmt.Fprintf(&b, "  %s[\"%s\"]\n", ids[n.ID], label)
	}
	for i, m := range a.Missing {
		id := "m" + strconv.Itoa(i)
		fmt.Fprintf(&b, "  %s{{\"missing: %s\"}}\n", id, mermaidText(m.Capability))
		for _, by := range m.NeededBy {
			fmt.Fprintf(&b, "  %s -.-x %s\n", ids[by], id)
		}
		fmt.Fprintf(&b, "  style %s stroke:#d00,color:#d00\n", id)
	}
	for _, e := range a.Edges {
		if e.Kind == "depends_on" {
			fmt.Fprintf(&b, "  %s --> %s\n", ids[e.From], ids[e.To])
		} else {
			fmt.Fprintf(&b, "  %s -. \"%s\" .-> %s\n", ids[e.From], mermaidText(e.Capability), ids[e.To])
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mermaidText(s string) string {
	return strings.NewReplacer(`"`, "#quot;", "<", "#lt;", ">", "#gt;").Replace(s)
}

func abbreviate(xs []string, n int) string {
	if len(xs) <= n {
		return strings.Join(xs, ", ")
	}
	ys := append([]string(nil), xs[:n]...)
	sort.Strings(ys)
	return strings.Join(ys, ", ") + fmt.Sprintf(", … (+%d)", len(xs)-n)
}
