package compose

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/capmesh/capmesh/wire"
)

// ParseGraph reads a deploy graph in any of the TOML shapes the ecoPrimals
// ecosystem uses (see docs/DECISIONS.md, "Audit and compose"):
//
//   - the biomeOS Neural API runtime shape: [graph] and top-level
//     [[nodes]] with depends_on, capabilities, [nodes.primal]
//     by_capability, [nodes.operation] name (start, primal.launch,
//     capability_call with params.capability, rpc_call with target and
//     params.method, health_check), [nodes.config] primal_name and
//     [nodes.capabilities_provided] semantic → actual method;
//   - the biomeos-graph DeploymentGraph shape: [[graph.nodes]] with id,
//     capability, depends_on, operation_dependencies, required, fallback;
//   - the primalSpring structural shape: [[graph.nodes]] with name, binary,
//     order, required, depends_on, by_capability and capabilities (methods).
//
// A node that launches or declares a primal becomes a Host (nodes naming
// the same primal are merged) and a vertex; any other node is a step whose
// capability calls are needs. capmesh adds one optional key: consumes (or
// consumed_capabilities) on a primal node, the Wire Standard's
// consumed_capabilities for a declared host.
func ParseGraph(data []byte) (*Composition, error) {
	var root map[string]any
	if err := toml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("deploy graph: %w", err)
	}
	c := &Composition{}
	g, _ := root["graph"].(map[string]any)
	c.Name = firstString(g["id"], g["name"])
	raw, ok := root["nodes"].([]any)
	if !ok {
		raw, ok = g["nodes"].([]any)
	}
	if !ok || len(raw) == 0 {
		return nil, fmt.Errorf("deploy graph: no [[nodes]] or [[graph.nodes]]")
	}
	aliases := map[string]string{} // alias → host name
	for i, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("deploy graph: node %d is not a table", i)
		}
		n, h, err := graphNode(m)
		if err != nil {
			return nil, fmt.Errorf("deploy graph: node %d: %w", i, err)
		}
		if h != nil {
			if old := c.Host(h.Name); old == nil {
				c.Hosts = append(c.Hosts, h)
			} else {
				old.Methods = union(old.Methods, h.Methods)
				old.Tokens = union(old.Tokens, h.Tokens)
				old.Consumes = mergeNeeds(old.Consumes, h.Consumes)
				old.Optional = old.Optional && h.Optional
			}
			for _, a := range hostAliases(n.ID, m) {
				if _, taken := aliases[a]; !taken {
					aliases[a] = h.Name
				}
			}
		}
		c.Nodes = append(c.Nodes, n)
	}
	// A host's consumed capabilities are needs of its first node.
	for _, h := range c.Hosts {
		if n := c.nodeOf(h.Name); n != nil {
			n.Needs = mergeNeeds(n.Needs, h.Consumes)
		}
	}
	// Steps address hosts by name or alias.
	for _, n := range c.Nodes {
		if n.Target != "" {
			if name, ok := aliases[n.Target]; ok {
				n.Target = name
			}
		}
	}
	return c, nil
}

// launchOps are operation names that bring a primal up or declare it.
var launchOps = map[string]bool{"start": true, "primal.launch": true, "launch": true, "register_only": true, "register_capabilities": true, "germinate": true}

func graphNode(m map[string]any) (*Node, *Host, error) {
	op, _ := m["operation"].(map[string]any)
	params, _ := op["params"].(map[string]any)
	config, _ := m["config"].(map[string]any)
	primal, _ := m["primal"].(map[string]any)
	opName := firstString(op["name"])
	nodeType := firstString(m["node_type"])

	n := &Node{ID: firstString(m["id"], m["name"]), DependsOn: strs(m["depends_on"])}
	if n.ID == "" {
		return nil, nil, fmt.Errorf("no id or name")
	}
	if req, ok := m["required"].(bool); ok && !req {
		n.Optional = true
	}
	if firstString(m["fallback"]) == "skip" {
		n.Optional = true
	}
	byCap := firstString(primal["by_capability"], m["by_capability"])
	provided, _ := m["capabilities_provided"].(map[string]any)
	primalName := firstString(config["primal_name"], primal["by_name"], m["binary"])
	if m["binary"] != nil {
		primalName = firstString(m["name"], m["binary"])
	}
	isHost := m["binary"] != nil || byCap != "" || len(provided) > 0 || launchOps[opName] || nodeType == "primal.launch" ||
		(primalName != "" && opName == "" && nodeType == "")
	switch {
	case opName == "capability_call":
		if capName := firstString(params["capability"]); capName != "" {
			n.Needs = append(n.Needs, Need{Capability: capName, Required: !n.Optional})
		}
	case opName == "rpc_call":
		n.Target = firstString(op["target"])
	case opName == "health_check" && primalName != "":
		n.Target = primalName
	}
	if capName := firstString(m["capability"]); capName != "" {
		n.Needs = append(n.Needs, Need{Capability: capName, Required: !n.Optional})
	}
	for _, d := range strs(m["operation_dependencies"]) {
		n.Needs = append(n.Needs, Need{Capability: d, Required: !n.Optional})
	}
	if !isHost {
		return n, nil, nil
	}
	name := primalName
	if name == "" {
		name = n.ID
	}
	h := &Host{Name: name, Source: "graph", Live: true, Trusted: true, Optional: n.Optional}
	n.Host = name
	for _, c := range append(strs(m["capabilities"]), strs(config["capabilities"])...) {
		if strings.Contains(c, ".") {
			h.Methods = union(h.Methods, []string{c})
		} else {
			h.Tokens = union(h.Tokens, []string{c})
		}
	}
	if byCap != "" {
		h.Tokens = union(h.Tokens, []string{byCap})
	}
	for k, v := range provided {
		for _, s := range []string{k, firstString(v)} {
			if strings.Contains(s, ".") {
				h.Methods = union(h.Methods, []string{s})
			} else if s != "" {
				h.Tokens = union(h.Tokens, []string{s})
			}
		}
	}
	h.Methods = sorted(h.Methods)
	for _, c := range append(strs(m["consumes"]), strs(m["consumed_capabilities"])...) {
		h.Consumes = append(h.Consumes, Need{Capability: c, Required: true})
	}
	return n, h, nil
}

// hostAliases are the names steps may use for the primal a node launches:
// its id, primal_name, by_name, binary, name, and the last word of its id
// (tower_songbird → songbird, start-loamspine → loamspine).
func hostAliases(id string, m map[string]any) []string {
	config, _ := m["config"].(map[string]any)
	primal, _ := m["primal"].(map[string]any)
	out := []string{id}
	for _, v := range []any{config["primal_name"], primal["by_name"], m["binary"], m["name"]} {
		if s := firstString(v); s != "" {
			out = append(out, s)
		}
	}
	if i := strings.LastIndexAny(id, "_-"); i >= 0 && i < len(id)-1 {
		out = append(out, id[i+1:])
	}
	return out
}

func firstString(vs ...any) string {
	for _, v := range vs {
		if s, ok := v.(string); ok && s != "" {
			return s
		}
	}
	return ""
}

func strs(v any) []string {
	arr, _ := v.([]any)
	var out []string
	for _, e := range arr {
		if s, ok := e.(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out
}

// ErrNotCapabilities is wrapped by ParseCapabilities when a document is
// JSON but not a capabilities.list answer (such as {"a":1}).
var ErrNotCapabilities = errors.New("capabilities: not a capabilities.list answer")

// ParseCapabilities reads a JSON array of capabilities.list answers (whole
// JSON-RPC responses or bare results), or a single one, into hosts. A
// result without a primal is named host-N. An entry that carries none of a
// capabilities answer's members (no primal, no method source, no consumed
// capabilities) is refused with ErrNotCapabilities rather than read as an
// empty host.
func ParseCapabilities(data []byte) ([]*Host, error) {
	data = bytes.TrimSpace(data)
	var items []json.RawMessage
	if len(data) > 0 && data[0] == '[' {
		var arr []json.RawMessage
		if err := json.Unmarshal(data, &arr); err != nil {
			return nil, fmt.Errorf("capabilities: %w", err)
		}
		// A bare array of method names is one Format A answer, not a list.
		var probe []string
		if json.Unmarshal(data, &probe) == nil {
			items = []json.RawMessage{data}
		} else {
			items = arr
		}
	} else {
		items = []json.RawMessage{data}
	}
	var out []*Host
	for i, it := range items {
		var resp struct {
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		result := it
		if json.Unmarshal(it, &resp) == nil && (resp.Result != nil || resp.Error != nil) {
			if resp.Result == nil {
				return nil, fmt.Errorf("capabilities: entry %d is an error response", i)
			}
			result = resp.Result
		}
		caps, err := wire.Parse(result)
		if err != nil {
			return nil, fmt.Errorf("capabilities: entry %d: %w", i, err)
		}
		if caps.Source == wire.SourceNone && caps.Primal == "" && len(caps.Consumed) == 0 {
			return nil, fmt.Errorf("%w: entry %d names no primal, methods, capabilities or consumed_capabilities", ErrNotCapabilities, i)
		}
		out = append(out, FromCapabilities(fmt.Sprintf("host-%d", i+1), caps))
	}
	return out, nil
}
