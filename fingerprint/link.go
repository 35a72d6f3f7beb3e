package fingerprint

import (
	"slices"
	"unicode/utf16"

	"github.com/capmesh/capmesh/canonical"
)

// CapabilityLink ties an agent's static hash to the runtime it ran with and,
// optionally, the invocation context: createCapabilityLink's result.
type CapabilityLink struct {
	AgentID     string `json:"agentId"`
	AgentName   string `json:"agentName"`
	StaticHash  string `json:"staticHash"`
	RuntimeHash string `json:"runtimeHash"`
	// InvocationHash is absent (nil), never null, when there is no context.
	InvocationHash *string   `json:"invocationHash,omitempty"`
	ToolRefs       []ToolRef `json:"toolRefs"`
}

// LinkInput is the argument of createCapabilityLink.
type LinkInput struct {
	AgentID, AgentName, StaticHash string
	Runtime                        Runtime
	// ToolRefs, when non-nil, replace the refs resolved from Runtime in the
	// link; the runtime hash is still computed from Runtime.
	ToolRefs []ToolRef
	// InvocationContext (any JSON value, markers allowed; zero Value means
	// none) and its top-level allowlist.
	InvocationContext          *canonical.Value
	InvocationContextAllowlist []string
	// Evaluate, when non-nil, makes the link computeFullCapabilityLink's:
	// the runtime's enabled names, static hashes and fallback specs come
	// from evaluating this root (EvaluatedRuntime), keeping only
	// Runtime.Augments.
	Evaluate Composable
}

// CreateCapabilityLink is createCapabilityLink, or computeFullCapabilityLink
// when in.Evaluate is set.
func CreateCapabilityLink(in LinkInput) (*CapabilityLink, error) {
	if in.Evaluate != nil {
		r, _, err := EvaluatedRuntime(in.Evaluate, in.Runtime.Augments)
		if err != nil {
			return nil, err
		}
		in.Runtime = *r
	}
	rh, err := in.Runtime.Hash()
	if err != nil {
		return nil, err
	}
	l := &CapabilityLink{AgentID: in.AgentID, AgentName: in.AgentName, StaticHash: in.StaticHash, RuntimeHash: rh, ToolRefs: in.ToolRefs}
	if in.InvocationContext != nil {
		h, ok, err := InvocationHash(*in.InvocationContext, in.InvocationContextAllowlist)
		if err != nil {
			return nil, err
		}
		if ok {
			l.InvocationHash = &h
		}
	}
	if l.ToolRefs == nil {
		if l.ToolRefs, err = in.Runtime.ToolRefs(); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// ToolRefsDiff is diffToolRefs' result.
type ToolRefsDiff struct {
	OnlyInFirst  []ToolRef         `json:"onlyInFirst"`
	OnlyInSecond []ToolRef         `json:"onlyInSecond"`
	HashChanged  []ToolHashChanged `json:"hashChanged"`
}

// ToolHashChanged is a tool present on both sides with different hashes.
type ToolHashChanged struct {
	ToolKey    string `json:"toolKey"`
	FirstHash  string `json:"firstHash"`
	SecondHash string `json:"secondHash"`
}

// orderedMap mimics a JS Map built from refs: a duplicated key keeps the
// position of its first occurrence and the value of its last.
func orderedMap(refs []ToolRef) ([]string, map[string]string) {
	var keys []string
	m := map[string]string{}
	for _, r := range refs {
		if _, ok := m[r.ToolKey]; !ok {
			keys = append(keys, r.ToolKey)
		}
		m[r.ToolKey] = r.ToolHash
	}
	return keys, m
}

// DiffToolRefs is diffToolRefs: tools only in first (first's order), only
// in second (second's order), and tools whose hashes differ (first's
// order). Nothing is sorted.
func DiffToolRefs(first, second []ToolRef) ToolRefsDiff {
	k1, m1 := orderedMap(first)
	k2, m2 := orderedMap(second)
	d := ToolRefsDiff{OnlyInFirst: []ToolRef{}, OnlyInSecond: []ToolRef{}, HashChanged: []ToolHashChanged{}}
	for _, k := range k1 {
		h2, ok := m2[k]
		switch {
		case !ok:
			d.OnlyInFirst = append(d.OnlyInFirst, ToolRef{k, m1[k]})
		case h2 != m1[k]:
			d.HashChanged = append(d.HashChanged, ToolHashChanged{k, m1[k], h2})
		}
	}
	for _, k := range k2 {
		if _, ok := m1[k]; !ok {
			d.OnlyInSecond = append(d.OnlyInSecond, ToolRef{k, m2[k]})
		}
	}
	return d
}

// LinkFields are the link fields diffCapabilityLinks compares, in order.
var LinkFields = []string{"agentId", "agentName", "staticHash", "runtimeHash", "invocationHash"}

// FieldChange is one changed link field; a nil side is undefined.
type FieldChange struct {
	Field  string  `json:"field"`
	First  *string `json:"first,omitempty"`
	Second *string `json:"second,omitempty"`
}

// LinksDiff is diffCapabilityLinks' result.
type LinksDiff struct {
	Unchanged []string      `json:"unchanged"`
	Changed   []FieldChange `json:"changed"`
}

func (l *CapabilityLink) field(name string) *string {
	switch name {
	case "agentId":
		return &l.AgentID
	case "agentName":
		return &l.AgentName
	case "staticHash":
		return &l.StaticHash
	case "runtimeHash":
		return &l.RuntimeHash
	default:
		return l.InvocationHash
	}
}

func eqOpt(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// DiffCapabilityLinks is diffCapabilityLinks: each of LinkFields compared
// with strict equality (undefined equals undefined); toolRefs are ignored.
func DiffCapabilityLinks(a, b *CapabilityLink) LinksDiff {
	d := LinksDiff{Unchanged: []string{}, Changed: []FieldChange{}}
	for _, f := range LinkFields {
		x, y := a.field(f), b.field(f)
		if eqOpt(x, y) {
			d.Unchanged = append(d.Unchanged, f)
		} else {
			d.Changed = append(d.Changed, FieldChange{f, x, y})
		}
	}
	return d
}

// ExplainCapabilityLinkRelationship is explainCapabilityLinkRelationship:
// one sentence naming the most significant difference.
func ExplainCapabilityLinkRelationship(a, b *CapabilityLink) string {
	switch {
	case a.AgentID != b.AgentID:
		return "Different agent ids."
	case len(DiffCapabilityLinks(a, b).Changed) == 0:
		return "Same capability link."
	case a.StaticHash != b.StaticHash:
		return "Different static capabilities (toolkit / definition changed)."
	case a.RuntimeHash != b.RuntimeHash:
		return "Same static capabilities; runtime differs (enabled tools or policies changed)."
	case !eqOpt(a.InvocationHash, b.InvocationHash):
		return "Same static and runtime; invocation context hash differs (subject, policy, or other binding changed)."
	default:
		return "Same static, runtime, and invocation hashes; display name differs only."
	}
}

// FormatHashShort is formatHashShort with the default 6+6: the first and
// last six UTF-16 units joined by "…", or h itself when it is empty or no
// longer than 13 units.
func FormatHashShort(h string) string { return FormatHashShortN(h, 6, 6) }

// FormatHashShortN is formatHashShort with explicit prefix and suffix
// lengths (in UTF-16 units).
func FormatHashShortN(h string, prefix, suffix int) string {
	u := utf16.Encode([]rune(h))
	if len(u) == 0 || len(u) <= prefix+suffix+1 {
		return h
	}
	return string(utf16.Decode(u[:prefix])) + "…" + string(utf16.Decode(u[len(u)-suffix:]))
}

// PolicyResultChange is one policy whose result differs between snapshots.
type PolicyResultChange struct {
	PolicyID string `json:"policyId"`
	First    bool   `json:"first"`
	Second   bool   `json:"second"`
}

// PolicyResult is one policy's result.
type PolicyResult struct {
	PolicyID string `json:"policyId"`
	Allowed  bool   `json:"allowed"`
}

// PolicySnapshotsDiff is diffPolicyEvaluationSnapshots' result.
type PolicySnapshotsDiff struct {
	OnlyInFirst  []PolicyResult       `json:"onlyInFirst"`
	OnlyInSecond []PolicyResult       `json:"onlyInSecond"`
	ValueChanged []PolicyResultChange `json:"valueChanged"`
}

// DiffPolicyEvaluationSnapshots compares two snapshots' results objects
// (policy id → allowed) in their JavaScript own-key order: array-index ids
// first, then insertion order.
func DiffPolicyEvaluationSnapshots(first, second canonical.Value) PolicySnapshotsDiff {
	k1, m1 := jsEntries(first)
	k2, m2 := jsEntries(second)
	d := PolicySnapshotsDiff{OnlyInFirst: []PolicyResult{}, OnlyInSecond: []PolicyResult{}, ValueChanged: []PolicyResultChange{}}
	for _, k := range k1 {
		if b, ok := m2[k]; !ok {
			d.OnlyInFirst = append(d.OnlyInFirst, PolicyResult{k, m1[k]})
		} else if b != m1[k] {
			d.ValueChanged = append(d.ValueChanged, PolicyResultChange{k, m1[k], b})
		}
	}
	for _, k := range k2 {
		if _, ok := m1[k]; !ok {
			d.OnlyInSecond = append(d.OnlyInSecond, PolicyResult{k, m2[k]})
		}
	}
	return d
}

func jsEntries(v canonical.Value) ([]string, map[string]bool) {
	order := make([]int32, len(v.Obj))
	for i := range order {
		order[i] = int32(i)
	}
	// Only the index-key hoisting matters here, not the collation.
	var idx, rest []string
	m := map[string]bool{}
	for _, x := range order {
		k := v.Obj[x].Key
		m[k] = v.Obj[x].Value.Kind == canonical.Bool && v.Obj[x].Value.Bool
		if _, ok := canonical.ArrayIndex(k); ok {
			idx = append(idx, k)
		} else {
			rest = append(rest, k)
		}
	}
	slices.SortFunc(idx, func(a, b string) int {
		x, _ := canonical.ArrayIndex(a)
		y, _ := canonical.ArrayIndex(b)
		return int(x) - int(y)
	})
	return append(idx, rest...), m
}

// AffordanceChange lists the policy ids added to and removed from a tool.
type AffordanceChange struct {
	ToolName string   `json:"toolName"`
	Added    []string `json:"added"`
	Removed  []string `json:"removed"`
}

// AffordanceDiff is diffAffordancePolicyIds' result.
type AffordanceDiff struct {
	OnlyInFirst  []string           `json:"onlyInFirst"`
	OnlyInSecond []string           `json:"onlyInSecond"`
	Changed      []AffordanceChange `json:"changed"`
}

// DiffAffordancePolicyIDs compares tool name → policy ids maps: tool names
// of both sides sorted by collation; for tools in both, the added and
// removed ids sorted by collation (tools without changes are left out).
func DiffAffordancePolicyIDs(first, second map[string][]string) AffordanceDiff {
	names := func(m map[string][]string) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out) // deterministic input to the stable collation sort
		return sortedStrings(out)
	}
	d := AffordanceDiff{OnlyInFirst: []string{}, OnlyInSecond: []string{}, Changed: []AffordanceChange{}}
	for _, n := range names(first) {
		ids2, ok := second[n]
		if !ok {
			d.OnlyInFirst = append(d.OnlyInFirst, n)
			continue
		}
		added := sortedStrings(slices.DeleteFunc(slices.Clone(ids2), func(s string) bool { return slices.Contains(first[n], s) }))
		removed := sortedStrings(slices.DeleteFunc(slices.Clone(first[n]), func(s string) bool { return slices.Contains(ids2, s) }))
		if len(added) > 0 || len(removed) > 0 {
			d.Changed = append(d.Changed, AffordanceChange{n, added, removed})
		}
	}
	for _, n := range names(second) {
		if _, ok := first[n]; !ok {
			d.OnlyInSecond = append(d.OnlyInSecond, n)
		}
	}
	return d
}
