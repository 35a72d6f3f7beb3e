package fingerprint

import (
	"fmt"
	"slices"
	"strings"

	"github.com/capmesh/capmesh/canonical"
)

// EvaluatedTool is one tool an evaluation enabled, with the spec
// tool().evaluate produced for it.
type EvaluatedTool struct {
	Name string
	Spec *ToolSpec
}

// Evaluation is what evaluating a composable yields for hashing: the
// enabled tools and the joined runtime instructions (which are not hashed).
type Evaluation struct {
	// Tools are in the own-key order of the reference's merged tools object
	// (Object.keys): array-index names first by value, then the others in
	// the order they were first enabled. A name enabled twice appears once,
	// at its first position, with the spec of its last occurrence.
	Tools []EvaluatedTool
	// Instructions are the evaluated instructions: an enabled tool's lines
	// joined with "\n\n"; a toolkit's own lines and its members'
	// instructions, empty parts dropped, joined with "\n\n" — or "" when
	// none of its members enabled a tool.
	Instructions string
}

// Names lists the enabled tool names in Tools order.
func (e *Evaluation) Names() []string {
	out := make([]string, len(e.Tools))
	for i, t := range e.Tools {
		out[i] = t.Name
	}
	return out
}

// toolSet is a JavaScript object of tool specs being merged with
// Object.assign: insertion order plus last-write-wins values.
type toolSet struct {
	order []string
	specs map[string]*ToolSpec
}

func (s *toolSet) set(name string, spec *ToolSpec) {
	if s.specs == nil {
		s.specs = map[string]*ToolSpec{}
	}
	if _, ok := s.specs[name]; !ok {
		s.order = append(s.order, name)
	}
	s.specs[name] = spec
}

// keys is Object.keys: array-index keys ascending, then the rest in
// insertion order.
func (s *toolSet) keys() []string {
	var idx, rest []string
	for _, k := range s.order {
		if _, ok := canonical.ArrayIndex(k); ok {
			idx = append(idx, k)
		} else {
			rest = append(rest, k)
		}
	}
	slices.SortFunc(idx, func(a, b string) int {
		x, _ := canonical.ArrayIndex(a)
		y, _ := canonical.ArrayIndex(b)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	return append(idx, rest...)
}

// merge is Object.assign(target, src): src's keys are visited in their
// own-key order.
func (s *toolSet) merge(src *toolSet) {
	for _, k := range src.keys() {
		s.set(k, src.specs[k])
	}
}

// evaluator runs one evaluation pass. Policies are evaluated at most once
// per pass, keyed by the identity of the policy (its address in the
// declaration), as the reference caches policy objects in a Map; since a
// declaration states each policy's outcome, the cache changes no result.
type evaluator struct {
	resolved map[*Policy]bool
}

func (ev *evaluator) allows(p *Policy) bool {
	if ok, seen := ev.resolved[p]; seen {
		return ok
	}
	ev.resolved[p] = !p.Denied
	return !p.Denied
}

// allowAll reports whether every policy of ps allows.
func (ev *evaluator) allowAll(ps []Policy) bool {
	for i := range ps {
		if !ev.allows(&ps[i]) {
			return false
		}
	}
	return true
}

func (ev *evaluator) eval(c Composable, depth int) (*toolSet, string, error) {
	if depth > maxDepth {
		return nil, "", fmt.Errorf("%w: composables nested deeper than %d", ErrDeclaration, maxDepth)
	}
	switch t := c.(type) {
	case *Tool:
		if !ev.allowAll(t.Policies) {
			return &toolSet{}, "", nil
		}
		s := &toolSet{}
		spec := t.Evaluate()
		s.set(t.Name, spec)
		return s, spec.Instructions, nil
	case *Toolkit:
		return ev.group(t.Instructions, t.Members, depth)
	case *DynamicToolkit:
		if !ev.allowAll(t.Policies) {
			return &toolSet{}, "", nil
		}
		return ev.group(t.Instructions, t.Created, depth)
	case nil:
		return nil, "", fmt.Errorf("%w: nil composable", ErrDeclaration)
	}
	return nil, "", fmt.Errorf("%w: unknown composable %T", ErrDeclaration, c)
}

// group evaluates the members of a toolkit (or the created members of an
// allowed dynamic toolkit) and merges them in member order.
func (ev *evaluator) group(own []string, members []Composable, depth int) (*toolSet, string, error) {
	merged := &toolSet{}
	parts := slices.Clone(own)
	enabled := false
	for _, m := range members {
		s, ins, err := ev.eval(m, depth+1)
		if err != nil {
			return nil, "", err
		}
		if len(s.order) > 0 {
			enabled = true
		}
		merged.merge(s)
		parts = append(parts, ins)
	}
	if !enabled {
		return merged, "", nil
	}
	parts = slices.DeleteFunc(parts, func(s string) bool { return s == "" })
	return merged, strings.Join(parts, "\n\n"), nil
}

// Evaluate evaluates root as the reference's composable.evaluate does with
// every policy's outcome as declared (Policy.Denied) and every dynamic
// toolkit's create() returning its Created members: a tool is enabled iff
// all its policies allow; a toolkit enables what its members enable (a
// later member's tool replaces an earlier one of the same name); a dynamic
// toolkit any of whose policies denies enables nothing.
func Evaluate(root Composable) (*Evaluation, error) {
	ev := &evaluator{resolved: map[*Policy]bool{}}
	s, ins, err := ev.eval(root, 0)
	if err != nil {
		return nil, err
	}
	e := &Evaluation{Instructions: ins}
	for _, k := range s.keys() {
		e.Tools = append(e.Tools, EvaluatedTool{Name: k, Spec: s.specs[k]})
	}
	return e, nil
}

// EvaluatedRuntime is the runtime computeFullCapabilityLink hashes: root's
// tool static hashes (CollectToolStaticHashes), the tools Evaluate enables
// and their evaluated specs as the fallback for tools without a static
// hash (every tool a dynamic toolkit created), with the given augments
// (nil: none).
func EvaluatedRuntime(root Composable, augments map[string]canonical.Value) (*Runtime, *Evaluation, error) {
	hashes, _, err := CollectToolStaticHashes(root)
	if err != nil {
		return nil, nil, err
	}
	e, err := Evaluate(root)
	if err != nil {
		return nil, nil, err
	}
	r := &Runtime{
		EnabledToolNames: e.Names(),
		NameToStaticHash: hashes,
		ToolsFallback:    make(map[string]*ToolSpec, len(e.Tools)),
		Augments:         augments,
	}
	for _, t := range e.Tools {
		r.ToolsFallback[t.Name] = t.Spec
	}
	return r, e, nil
}

// RuntimeToolHash is one enabled tool's hashes: its base hash (static, or
// from its evaluated spec) and, with an augment, the runtime tool binding
// hash that the runtime hash commits to instead.
type RuntimeToolHash struct {
	Name string `json:"name"`
	// BaseHash is the static hash, or the evaluated spec's hash for a tool
	// without one.
	BaseHash string `json:"baseHash"`
	// Static is false when BaseHash comes from the evaluated spec.
	Static bool `json:"static"`
	// Augment is the runtime binding, when the tool has one.
	Augment *canonical.Value `json:"-"`
	// ToolHash is what the tool ref carries: BaseHash, or the binding hash.
	ToolHash string `json:"toolHash"`
}

// ToolHashes lists, for each tool ref of r (in the same order), how its
// hash was made.
func (r *Runtime) ToolHashes() ([]RuntimeToolHash, error) {
	refs, err := r.ToolRefs()
	if err != nil {
		return nil, err
	}
	out := make([]RuntimeToolHash, len(refs))
	for i, ref := range refs {
		t := RuntimeToolHash{Name: ref.ToolKey, ToolHash: ref.ToolHash, BaseHash: r.NameToStaticHash[ref.ToolKey]}
		t.Static = t.BaseHash != ""
		if !t.Static {
			if t.BaseHash, err = r.ToolsFallback[ref.ToolKey].Hash(); err != nil {
				return nil, err
			}
		}
		if aug, ok := r.augment(ref.ToolKey); ok {
			t.Augment = &aug
		}
		out[i] = t
	}
	return out, nil
}

// DecodeToolRefs reads a JSON array of {toolKey, toolHash} (a link's
// toolRefs).
func DecodeToolRefs(v canonical.Value) ([]ToolRef, error) { return decodeToolRefs(v, "$") }
