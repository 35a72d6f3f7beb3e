package fingerprint

import (
	"fmt"
	"slices"
	"strings"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/canonical/collate"
)

// Schema is a tool's input schema as schemaToHashInput sees it. The
// reference calls the schema's toJSONSchema() when it has one (Zod 4 does)
// and otherwise hashes the Standard Schema "~standard" vendor and version.
// A Go port cannot run the schema library, so the caller supplies what it
// would return.
type Schema struct {
	// JSONSchema is the value toJSONSchema() returns. When non-nil it is
	// hashed as is (markers allowed); an {"$undefined":true} result drops
	// the schema key from the payload.
	JSONSchema *canonical.Value
	// Vendor and Version are schema["~standard"].vendor and .version, used
	// when JSONSchema is nil. A nil field is undefined and drops its key.
	Vendor  *string
	Version *canonical.Value
}

// StandardSchema is a schema without toJSONSchema(): {vendor, version}.
func StandardSchema(vendor string, version int) Schema {
	v := canonical.Value{Kind: canonical.Number, Str: fmt.Sprint(version)}
	return Schema{Vendor: &vendor, Version: &v}
}

// JSONSchema is a schema whose toJSONSchema() returns v.
func JSONSchema(v canonical.Value) Schema { return Schema{JSONSchema: &v} }

// hashInput is schemaToHashInput; ok is false when the result is undefined.
func (s Schema) hashInput(t *tree) (canonical.Value, bool, error) {
	if s.JSONSchema != nil {
		v, ok, err := plain(*s.JSONSchema, 0)
		if err != nil {
			return v, false, fmt.Errorf("schema: %w", err)
		}
		return v, ok, nil
	}
	var buf [2]canonical.Member
	ms := buf[:0]
	if s.Vendor != nil {
		ms = append(ms, member("vendor", str(*s.Vendor)))
	}
	if s.Version != nil {
		v, ok, err := plain(*s.Version, 0)
		if err != nil {
			return v, false, fmt.Errorf("schema version: %w", err)
		}
		if ok {
			ms = append(ms, member("version", v))
		}
	}
	return t.object(ms...), true, nil
}

// Policy is a tool or dynamic-toolkit policy as far as hashing is
// concerned: its id, its executeBinding (nil means "live") and, for
// evaluation, its stated outcome.
type Policy struct {
	ID             string
	ExecuteBinding *string
	// Denied states that the policy's evaluation denies (or throws) in the
	// evaluation a full capability link describes. It is not hashed; the
	// zero value allows.
	Denied bool
}

// Tool is a tool() declaration.
type Tool struct {
	Name string
	// Description nil is undefined (hashed as null); "" stays "".
	Description *string
	InputSchema Schema
	// Instructions are the instruction lines; nil hashes as [].
	Instructions []string
	Policies     []Policy
}

// ComposableName returns the tool's name.
func (t *Tool) ComposableName() string { return t.Name }

// sortedStrings returns a copy of ss stable-sorted by collation.
func sortedStrings(ss []string) []string {
	out := slices.Clone(ss)
	if out == nil {
		out = []string{}
	}
	slices.SortStableFunc(out, collate.Compare)
	return out
}

func policyIDs(ps []Policy) []string {
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	return ids
}

// StaticPayload is the pre-hash object of tool(args).computeStaticHash():
// kind, name, description (null when absent), schema, instruction lines and
// policy ids sorted by collation, and policyBindings {id, executeBinding}
// sorted by id only when there are policies.
func (t *Tool) StaticPayload() (canonical.Value, error) { return t.payload(new(tree)) }

func (t *Tool) payload(tr *tree) (canonical.Value, error) {
	schema, hasSchema, err := t.InputSchema.hashInput(tr)
	if err != nil {
		return canonical.Value{}, fmt.Errorf("tool %q: %w", t.Name, err)
	}
	// One stable sort by id orders both the policy ids and the bindings.
	var pbuf [8]Policy
	ps := append(pbuf[:0], t.Policies...)
	slices.SortStableFunc(ps, func(a, b Policy) int { return collate.Compare(a.ID, b.ID) })
	ids := tr.values(len(ps))
	for i, p := range ps {
		ids[i] = str(p.ID)
	}
	ms := append(tr.members(7),
		member("description", strOrNull(t.Description)),
		member("instructions", tr.sortedStrings(t.Instructions)),
		member("kind", str("tool")),
		member("name", str(t.Name)),
		member("policies", canonical.Value{Kind: canonical.Array, Arr: ids}))
	if len(ps) > 0 {
		bindings := tr.values(len(ps))
		for i, p := range ps {
			eb := "live"
			if p.ExecuteBinding != nil {
				eb = *p.ExecuteBinding
			}
			bindings[i] = tr.object(member("executeBinding", str(eb)), member("id", str(p.ID)))
		}
		ms = append(ms, member("policyBindings", canonical.Value{Kind: canonical.Array, Arr: bindings}))
	}
	if hasSchema {
		ms = append(ms, member("schema", schema))
	}
	return canonical.Value{Kind: canonical.Object, Obj: ms}, nil
}

// StaticHash is computeStaticHash().
func (t *Tool) StaticHash() (string, error) { return hashTree("tool", t.Name, t.payload) }

func (*Tool) composable() {}

// Evaluate returns the ToolSpec tool().evaluate produces: instructions
// joined with "\n\n" in original order, policy ids sorted.
func (t *Tool) Evaluate() *ToolSpec {
	ins := strings.Join(t.Instructions, "\n\n")
	return &ToolSpec{
		Name:         t.Name,
		Description:  t.Description,
		InputSchema:  t.InputSchema,
		Instructions: ins,
		PolicyIDs:    sortedStrings(policyIDs(t.Policies)),
	}
}

// ToolSpec is an evaluated tool specification (the reference's ToolSpec),
// which is how tools reached only at evaluation time — every tool under a
// dynamic toolkit — are hashed.
type ToolSpec struct {
	Name        string
	Description *string
	InputSchema Schema
	// Instructions is the joined instruction text; "" means none.
	Instructions string
	// PolicyIDs are used as given (the evaluated spec already sorted them).
	PolicyIDs []string
}

// Payload is toolSpecCanonicalPayload: the tool payload rebuilt from an
// evaluated spec. It differs from Tool.StaticPayload: instructions are
// split on "\n\n" (so empty lines vanish and lines containing "\n\n" are
// split), policy ids are not re-sorted, and there is never a
// policyBindings field.
func (s *ToolSpec) Payload() (canonical.Value, error) { return s.payload(new(tree)) }

func (s *ToolSpec) payload(t *tree) (canonical.Value, error) {
	var lines []string
	if s.Instructions != "" {
		lines = strings.Split(s.Instructions, "\n\n")
	}
	return specPayload(t, s.Name, strOrNull(s.Description), s.InputSchema, t.sortedStrings(lines), t.strings(s.PolicyIDs))
}

// specPayload is the payload of an evaluated or wire spec; lines and ids
// are string arrays, already in the order they are hashed in.
func specPayload(t *tree, name string, desc canonical.Value, schema Schema, lines, ids canonical.Value) (canonical.Value, error) {
	sv, hasSchema, err := schema.hashInput(t)
	if err != nil {
		return canonical.Value{}, fmt.Errorf("tool %q: %w", name, err)
	}
	var buf [6]canonical.Member
	ms := append(buf[:0],
		member("description", desc),
		member("instructions", lines),
		member("kind", str("tool")),
		member("name", str(name)),
		member("policies", ids),
	)
	if hasSchema {
		ms = append(ms, member("schema", sv))
	}
	return t.object(ms...), nil
}

// Hash is hashToolSpecStatic.
func (s *ToolSpec) Hash() (string, error) { return hashTree("tool", s.Name, s.payload) }

// ToolSpecWire is the wire form of a ToolSpec (toolSpecToWire): the
// description defaults to "", the schema is already its hash input, and
// policy ids are a sorted copy.
type ToolSpecWire struct {
	Name         string
	Description  string
	Instructions string
	InputSchema  Schema
	PolicyIDs    []string
}

// Wire is toolSpecToWire.
func (s *ToolSpec) Wire() ToolSpecWire {
	d := ""
	if s.Description != nil {
		d = *s.Description
	}
	return ToolSpecWire{Name: s.Name, Description: d, Instructions: s.Instructions, InputSchema: s.InputSchema, PolicyIDs: sortedStrings(s.PolicyIDs)}
}

// Payload is toolCapabilityPayloadFromWire: like ToolSpec.Payload, except
// that an empty description hashes as null (so a static description "" and
// its wire round trip hash differently) and policy ids are sorted again.
func (w ToolSpecWire) Payload() (canonical.Value, error) { return w.payload(new(tree)) }

func (w ToolSpecWire) payload(t *tree) (canonical.Value, error) {
	desc := null
	if w.Description != "" {
		desc = str(w.Description)
	}
	var lines []string
	if w.Instructions != "" {
		lines = strings.Split(w.Instructions, "\n\n")
	}
	return specPayload(t, w.Name, desc, w.InputSchema, t.sortedStrings(lines), t.sortedStrings(w.PolicyIDs))
}

// Hash hashes the wire payload.
func (w ToolSpecWire) Hash() (string, error) { return hashTree("tool", w.Name, w.payload) }
