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
func (s Schema) hashInput() (canonical.Value, bool, error) {
	if s.JSONSchema != nil {
		v, ok, err := plain(*s.JSONSchema, 0)
		if err != nil {
			return v, false, fmt.Errorf("schema: %w", err)
		}
		return v, ok, nil
	}
	ms := make([]canonical.Member, 0, 2)
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
	return object(ms...), true, nil
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

// sortedArray is the JSON array of ss stable-sorted by collation.
func sortedArray(ss []string) canonical.Value {
	v := strArray(ss)
	slices.SortStableFunc(v.Arr, func(a, b canonical.Value) int { return collate.Compare(a.Str, b.Str) })
	return v
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
func (t *Tool) StaticPayload() (canonical.Value, error) {
	schema, hasSchema, err := t.InputSchema.hashInput()
	if err != nil {
		return canonical.Value{}, fmt.Errorf("tool %q: %w", t.Name, err)
	}
	// One stable sort by id orders both the policy ids and the bindings.
	ps := slices.SortedStableFunc(slices.Values(t.Policies), func(a, b Policy) int { return collate.Compare(a.ID, b.ID) })
	ids := canonical.Value{Kind: canonical.Array, Arr: make([]canonical.Value, len(ps))}
	for i, p := range ps {
		ids.Arr[i] = str(p.ID)
	}
	ms := make([]canonical.Member, 0, 7)
	ms = append(ms,
		member("description", strOrNull(t.Description)),
		member("instructions", sortedArray(t.Instructions)),
		member("kind", str("tool")),
		member("name", str(t.Name)),
		member("policies", ids))
	if len(ps) > 0 {
		arr := canonical.Value{Kind: canonical.Array, Arr: make([]canonical.Value, len(ps))}
		for i, p := range ps {
			eb := "live"
			if p.ExecuteBinding != nil {
				eb = *p.ExecuteBinding
			}
			arr.Arr[i] = object(member("executeBinding", str(eb)), member("id", str(p.ID)))
		}
		ms = append(ms, member("policyBindings", arr))
	}
	if hasSchema {
		ms = append(ms, member("schema", schema))
	}
	return object(ms...), nil
}

// StaticHash is computeStaticHash().
func (t *Tool) StaticHash() (string, error) {
	p, err := t.StaticPayload()
	return hashPayload("tool", t.Name, p, err)
}

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
func (s *ToolSpec) Payload() (canonical.Value, error) {
	var lines []string
	if s.Instructions != "" {
		lines = strings.Split(s.Instructions, "\n\n")
	}
	ids := s.PolicyIDs
	if ids == nil {
		ids = []string{}
	}
	return specPayload(s.Name, strOrNull(s.Description), s.InputSchema, sortedStrings(lines), ids)
}

func specPayload(name string, desc canonical.Value, schema Schema, lines, ids []string) (canonical.Value, error) {
	sv, hasSchema, err := schema.hashInput()
	if err != nil {
		return canonical.Value{}, fmt.Errorf("tool %q: %w", name, err)
	}
	ms := []canonical.Member{
		member("description", desc),
		member("instructions", strArray(lines)),
		member("kind", str("tool")),
		member("name", str(name)),
		member("policies", strArray(ids)),
	}
	if hasSchema {
		ms = append(ms, member("schema", sv))
	}
	return object(ms...), nil
}

// Hash is hashToolSpecStatic.
func (s *ToolSpec) Hash() (string, error) {
	p, err := s.Payload()
	return hashPayload("tool", s.Name, p, err)
}

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
func (w ToolSpecWire) Payload() (canonical.Value, error) {
	desc := null
	if w.Description != "" {
		desc = str(w.Description)
	}
	var lines []string
	if w.Instructions != "" {
		lines = strings.Split(w.Instructions, "\n\n")
	}
	return specPayload(w.Name, desc, w.InputSchema, sortedStrings(lines), sortedStrings(w.PolicyIDs))
}

// Hash hashes the wire payload.
func (w ToolSpecWire) Hash() (string, error) {
	p, err := w.Payload()
	return hashPayload("tool", w.Name, p, err)
}
