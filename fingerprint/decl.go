package fingerprint

import (
	"errors"
	"fmt"

	"github.com/capmesh/capmesh/canonical"
)

// The JSON declaration format lets TypeScript users hash the same
// declarations in both worlds (it is the input format of the reference test
// vectors). Values JSON cannot carry use the markers of the package
// documentation.
//
//	tool:            {"kind":"tool", "name":…, "description":…?, "inputSchema":{"~standard":{"vendor":…,"version":…}} | {"toJSONSchema":…},
//	                  "instructions":[…]?, "policies":[{"id":…, "executeBinding":…?}]?}
//	toolkit:         {"kind":"toolkit", "name":…, "instructions":[…]?, "members":[composable…]}
//	                  (a policy may state its evaluation outcome: "allow":false denies; absent or true allows)
//	dynamic toolkit: {"kind":"dynamicToolkit", "name":…, "instructions":[…]?, "policies":[…]?, "create":[composable…]?}
//	                  ("create" lists the members create() returns at evaluation time; not hashed statically)
//	agent:           {"agentId":…, "name":…, "instructions":[…], "rootComposable":composable}
//	runtime:         {"enabledToolNames":[…], "nameToStaticHash":[[name,hash]…] | {name:hash}, "graph":composable?,
//	                  "toolsFallback":{name:toolSpec}?, "runtimeToolAugments":{name:value}?}
//	tool spec:       {"name":…, "description":…?, "inputSchema":…, "instructions":"…"?, "policyIds":[…]?}
//	link input:      runtime fields plus "agent" (an agent declaration, or {"agentId","name","staticHash"}),
//	                 "invocationContext"?, "invocationContextAllowlist"?, "toolRefs"?; with an agent
//	                 declaration and none of graph, enabledToolNames, nameToStaticHash and toolsFallback,
//	                 the agent is evaluated (computeFullCapabilityLink) with the declared policy outcomes
//	link:            {"agentId","agentName","staticHash","runtimeHash","invocationHash"?,"toolRefs":[{"toolKey","toolHash"}]}
//
// A null or undefined optional field is the same as an absent one.

// ErrDeclaration reports a declaration document that does not have the
// expected shape.
var ErrDeclaration = errors.New("invalid declaration")

func declErr(path, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrDeclaration, path, fmt.Sprintf(format, args...))
}

// get returns the member key of object v, treating null and undefined as
// absent.
func get(v canonical.Value, key string) (canonical.Value, bool) {
	for _, m := range v.Obj {
		if m.Key == key {
			if m.Value.Kind == canonical.Null || IsUndefined(m.Value) {
				return m.Value, false
			}
			return m.Value, true
		}
	}
	return canonical.Value{}, false
}

func getString(v canonical.Value, key, path string, required bool) (*string, error) {
	x, ok := get(v, key)
	if !ok {
		if required {
			return nil, declErr(path, "missing %q", key)
		}
		return nil, nil
	}
	if x.Kind != canonical.String {
		return nil, declErr(path+"."+key, "want a string")
	}
	return &x.Str, nil
}

func getStrings(v canonical.Value, key, path string) ([]string, bool, error) {
	x, ok := get(v, key)
	if !ok {
		return nil, false, nil
	}
	if x.Kind != canonical.Array {
		return nil, false, declErr(path+"."+key, "want an array of strings")
	}
	out := make([]string, len(x.Arr))
	for i, e := range x.Arr {
		if e.Kind != canonical.String {
			return nil, false, declErr(fmt.Sprintf("%s.%s[%d]", path, key, i), "want a string")
		}
		out[i] = e.Str
	}
	return out, true, nil
}

func asObject(v canonical.Value, path string) (canonical.Value, error) {
	if k, arg, ok := marker(v); ok && k == markLiteral {
		v = arg
	}
	if v.Kind != canonical.Object {
		return v, declErr(path, "want an object")
	}
	return v, nil
}

// DecodeSchema reads an inputSchema declaration.
func DecodeSchema(v canonical.Value, path string) (Schema, error) {
	v, err := asObject(v, path)
	if err != nil {
		return Schema{}, err
	}
	for _, m := range v.Obj {
		if m.Key == "toJSONSchema" {
			j := m.Value
			return Schema{JSONSchema: &j}, nil
		}
	}
	std, ok := get(v, "~standard")
	if !ok {
		return Schema{}, declErr(path, `want "toJSONSchema" or "~standard"`)
	}
	if std, err = asObject(std, path+".~standard"); err != nil {
		return Schema{}, err
	}
	var s Schema
	for _, m := range std.Obj {
		switch m.Key {
		case "vendor":
			if IsUndefined(m.Value) {
				continue
			}
			if m.Value.Kind != canonical.String {
				return Schema{}, declErr(path+".~standard.vendor", "want a string")
			}
			vendor := m.Value.Str
			s.Vendor = &vendor
		case "version":
			if !IsUndefined(m.Value) {
				ver := m.Value
				s.Version = &ver
			}
		}
	}
	return s, nil
}

func decodePolicies(v canonical.Value, path string) ([]Policy, error) {
	x, ok := get(v, "policies")
	if !ok {
		return nil, nil
	}
	if x.Kind != canonical.Array {
		return nil, declErr(path+".policies", "want an array")
	}
	out := make([]Policy, len(x.Arr))
	for i, e := range x.Arr {
		p := fmt.Sprintf("%s.policies[%d]", path, i)
		if e.Kind == canonical.String { // a bare id
			out[i] = Policy{ID: e.Str}
			continue
		}
		e, err := asObject(e, p)
		if err != nil {
			return nil, err
		}
		id, err := getString(e, "id", p, true)
		if err != nil {
			return nil, err
		}
		eb, err := getString(e, "executeBinding", p, false)
		if err != nil {
			return nil, err
		}
		out[i] = Policy{ID: *id, ExecuteBinding: eb}
		if a, ok := get(e, "allow"); ok {
			if a.Kind != canonical.Bool {
				return nil, declErr(p+".allow", "want true or false")
			}
			out[i].Denied = !a.Bool
		}
	}
	return out, nil
}

// DecodeComposable reads a tool, toolkit or dynamicToolkit declaration.
func DecodeComposable(v canonical.Value) (Composable, error) { return decodeComposable(v, "$", 0) }

func decodeComposable(v canonical.Value, path string, depth int) (Composable, error) {
	if depth > maxDepth {
		return nil, declErr(path, "nesting deeper than %d", maxDepth)
	}
	v, err := asObject(v, path)
	if err != nil {
		return nil, err
	}
	kind, err := getString(v, "kind", path, true)
	if err != nil {
		return nil, err
	}
	name, err := getString(v, "name", path, true)
	if err != nil {
		return nil, err
	}
	ins, _, err := getStrings(v, "instructions", path)
	if err != nil {
		return nil, err
	}
	switch *kind {
	case "tool":
		t := &Tool{Name: *name, Instructions: ins}
		if t.Description, err = getString(v, "description", path, false); err != nil {
			return nil, err
		}
		sv, ok := get(v, "inputSchema")
		if !ok {
			return nil, declErr(path, `missing "inputSchema"`)
		}
		if t.InputSchema, err = DecodeSchema(sv, path+".inputSchema"); err != nil {
			return nil, err
		}
		if t.Policies, err = decodePolicies(v, path); err != nil {
			return nil, err
		}
		return t, nil
	case "toolkit":
		k := &Toolkit{Name: *name, Instructions: ins}
		if k.Members, err = decodeMembers(v, "members", path, depth); err != nil {
			return nil, err
		}
		return k, nil
	case "dynamicToolkit":
		k := &DynamicToolkit{Name: *name, Instructions: ins}
		if k.Policies, err = decodePolicies(v, path); err != nil {
			return nil, err
		}
		if k.Created, err = decodeMembers(v, "create", path, depth); err != nil {
			return nil, err
		}
		return k, nil
	}
	return nil, declErr(path+".kind", "%q is not tool, toolkit or dynamicToolkit", *kind)
}

// decodeMembers reads the composables listed under key.
func decodeMembers(v canonical.Value, key, path string, depth int) ([]Composable, error) {
	ms, ok := get(v, key)
	if ok && ms.Kind != canonical.Array {
		return nil, declErr(path+"."+key, "want an array")
	}
	var out []Composable
	for i, m := range ms.Arr {
		c, err := decodeComposable(m, fmt.Sprintf("%s.%s[%d]", path, key, i), depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// DecodeAgent reads a registered agent declaration.
func DecodeAgent(v canonical.Value) (*RegisteredAgent, error) {
	v, err := asObject(v, "$")
	if err != nil {
		return nil, err
	}
	a := &RegisteredAgent{}
	id, err := getString(v, "agentId", "$", true)
	if err != nil {
		return nil, err
	}
	name, err := getString(v, "name", "$", false)
	if err != nil {
		return nil, err
	}
	a.AgentID = *id
	if name != nil {
		a.Name = *name
	}
	if a.Instructions, _, err = getStrings(v, "instructions", "$"); err != nil {
		return nil, err
	}
	root, ok := get(v, "rootComposable")
	if !ok {
		return nil, declErr("$", `missing "rootComposable"`)
	}
	if a.Root, err = decodeComposable(root, "$.rootComposable", 0); err != nil {
		return nil, err
	}
	return a, nil
}

// DecodeToolSpec reads an evaluated tool spec.
func DecodeToolSpec(v canonical.Value, path string) (*ToolSpec, error) {
	v, err := asObject(v, path)
	if err != nil {
		return nil, err
	}
	name, err := getString(v, "name", path, true)
	if err != nil {
		return nil, err
	}
	s := &ToolSpec{Name: *name}
	if s.Description, err = getString(v, "description", path, false); err != nil {
		return nil, err
	}
	if ins, err := getString(v, "instructions", path, false); err != nil {
		return nil, err
	} else if ins != nil {
		s.Instructions = *ins
	}
	if s.PolicyIDs, _, err = getStrings(v, "policyIds", path); err != nil {
		return nil, err
	}
	sv, ok := get(v, "inputSchema")
	if !ok {
		return nil, declErr(path, `missing "inputSchema"`)
	}
	if s.InputSchema, err = DecodeSchema(sv, path+".inputSchema"); err != nil {
		return nil, err
	}
	return s, nil
}

// DecodeRuntime reads a runtime document. When nameToStaticHash is absent
// and a "graph" composable is given, the map is collected from the graph;
// when enabledToolNames is absent too, every tool of the graph is enabled.
func DecodeRuntime(v canonical.Value) (*Runtime, error) {
	v, err := asObject(v, "$")
	if err != nil {
		return nil, err
	}
	r := &Runtime{NameToStaticHash: map[string]string{}}
	names, hasNames, err := getStrings(v, "enabledToolNames", "$")
	if err != nil {
		return nil, err
	}
	r.EnabledToolNames = names
	if g, ok := get(v, "graph"); ok {
		c, err := decodeComposable(g, "$.graph", 0)
		if err != nil {
			return nil, err
		}
		hs, order, err := CollectToolStaticHashes(c)
		if err != nil {
			return nil, err
		}
		r.NameToStaticHash = hs
		if !hasNames {
			r.EnabledToolNames = order
		}
	}
	if m, ok := get(v, "nameToStaticHash"); ok {
		r.NameToStaticHash = map[string]string{}
		switch m.Kind {
		case canonical.Array:
			for i, e := range m.Arr {
				if e.Kind != canonical.Array || len(e.Arr) != 2 || e.Arr[0].Kind != canonical.String || e.Arr[1].Kind != canonical.String {
					return nil, declErr(fmt.Sprintf("$.nameToStaticHash[%d]", i), "want [name, hash]")
				}
				r.NameToStaticHash[e.Arr[0].Str] = e.Arr[1].Str
			}
		case canonical.Object:
			for _, e := range m.Obj {
				if e.Value.Kind != canonical.String {
					return nil, declErr("$.nameToStaticHash."+e.Key, "want a string")
				}
				r.NameToStaticHash[e.Key] = e.Value.Str
			}
		default:
			return nil, declErr("$.nameToStaticHash", "want [[name, hash]…] or {name: hash}")
		}
	}
	if f, ok := get(v, "toolsFallback"); ok {
		if f, err = asObject(f, "$.toolsFallback"); err != nil {
			return nil, err
		}
		r.ToolsFallback = map[string]*ToolSpec{}
		for _, e := range f.Obj {
			s, err := DecodeToolSpec(e.Value, "$.toolsFallback."+e.Key)
			if err != nil {
				return nil, err
			}
			r.ToolsFallback[e.Key] = s
		}
	}
	if a, ok := get(v, "runtimeToolAugments"); ok {
		if a, err = asObject(a, "$.runtimeToolAugments"); err != nil {
			return nil, err
		}
		r.Augments = map[string]canonical.Value{}
		for _, e := range a.Obj {
			r.Augments[e.Key] = e.Value
		}
	}
	return r, nil
}

// DecodeLinkInput reads a link input document.
func DecodeLinkInput(v canonical.Value) (*LinkInput, error) {
	v, err := asObject(v, "$")
	if err != nil {
		return nil, err
	}
	ag, ok := get(v, "agent")
	if !ok {
		return nil, declErr("$", `missing "agent"`)
	}
	if ag, err = asObject(ag, "$.agent"); err != nil {
		return nil, err
	}
	in := &LinkInput{}
	rv := v
	if _, hasRoot := get(ag, "rootComposable"); hasRoot {
		a, err := DecodeAgent(ag)
		if err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		if in.StaticHash, err = a.StaticHash(); err != nil {
			return nil, err
		}
		in.AgentID, in.AgentName = a.AgentID, a.Name
		if !hasAnyKey(v, "graph", "enabledToolNames", "nameToStaticHash", "toolsFallback") {
			// No runtime stated: evaluate the agent (computeFullCapabilityLink).
			in.Evaluate = a.Root
		} else if _, hasGraph := get(v, "graph"); !hasGraph {
			// Default the runtime graph to the agent's root composable.
			rv.Obj = append(append([]canonical.Member(nil), v.Obj...), member("graph", mustGet(ag, "rootComposable")))
		}
	} else {
		for key, dst := range map[string]*string{"agentId": &in.AgentID, "name": &in.AgentName, "staticHash": &in.StaticHash} {
			s, err := getString(ag, key, "$.agent", true)
			if err != nil {
				return nil, err
			}
			*dst = *s
		}
	}
	r, err := DecodeRuntime(rv)
	if err != nil {
		return nil, err
	}
	in.Runtime = *r
	if c, ok := get(v, "invocationContext"); ok {
		in.InvocationContext = &c
	}
	if in.InvocationContextAllowlist, _, err = getStrings(v, "invocationContextAllowlist", "$"); err != nil {
		return nil, err
	}
	if refs, ok := get(v, "toolRefs"); ok {
		if in.ToolRefs, err = decodeToolRefs(refs, "$.toolRefs"); err != nil {
			return nil, err
		}
	}
	return in, nil
}

func hasAnyKey(v canonical.Value, keys ...string) bool {
	for _, k := range keys {
		if _, ok := get(v, k); ok {
			return true
		}
	}
	return false
}

func mustGet(v canonical.Value, key string) canonical.Value {
	x, _ := get(v, key)
	return x
}

func decodeToolRefs(v canonical.Value, path string) ([]ToolRef, error) {
	if v.Kind != canonical.Array {
		return nil, declErr(path, "want an array")
	}
	out := make([]ToolRef, 0, len(v.Arr))
	for i, e := range v.Arr {
		p := fmt.Sprintf("%s[%d]", path, i)
		e, err := asObject(e, p)
		if err != nil {
			return nil, err
		}
		k, err := getString(e, "toolKey", p, true)
		if err != nil {
			return nil, err
		}
		h, err := getString(e, "toolHash", p, true)
		if err != nil {
			return nil, err
		}
		out = append(out, ToolRef{*k, *h})
	}
	return out, nil
}

// DecodeLink reads a capability link document (createCapabilityLink's
// output).
func DecodeLink(v canonical.Value) (*CapabilityLink, error) {
	v, err := asObject(v, "$")
	if err != nil {
		return nil, err
	}
	l := &CapabilityLink{ToolRefs: []ToolRef{}}
	for key, dst := range map[string]*string{"agentId": &l.AgentID, "agentName": &l.AgentName, "staticHash": &l.StaticHash, "runtimeHash": &l.RuntimeHash} {
		s, err := getString(v, key, "$", true)
		if err != nil {
			return nil, err
		}
		*dst = *s
	}
	if l.InvocationHash, err = getString(v, "invocationHash", "$", false); err != nil {
		return nil, err
	}
	if refs, ok := get(v, "toolRefs"); ok {
		if l.ToolRefs, err = decodeToolRefs(refs, "$.toolRefs"); err != nil {
			return nil, err
		}
	}
	return l, nil
}
