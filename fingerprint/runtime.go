package fingerprint

import (
	"fmt"

	"github.com/capmesh/capmesh/canonical"
)

// ToolRef is one enabled tool of a runtime: its name and the hash the
// runtime hash commits to.
type ToolRef struct {
	ToolKey  string `json:"toolKey"`
	ToolHash string `json:"toolHash"`
}

// Runtime is the input of computeRuntimeHash and resolveRuntimeToolRefs.
type Runtime struct {
	// EnabledToolNames are the tools enabled after policy evaluation.
	EnabledToolNames []string
	// NameToStaticHash maps tool names to static hashes (the reference's
	// Map); an empty hash counts as missing.
	NameToStaticHash map[string]string
	// ToolsFallback supplies evaluated specs for tools without a static
	// hash (tools under dynamic toolkits), hashed with ToolSpec.Hash.
	ToolsFallback map[string]*ToolSpec
	// Augments are runtimeToolAugments: per-tool runtime bindings (any JSON
	// value) that wrap the tool's hash in a runtime_tool_binding hash. nil
	// means no augments object; an {"$undefined":true} value counts as
	// absent.
	Augments map[string]canonical.Value
}

// objectPrototypeProps are the properties a plain JavaScript object
// inherits, which the reference's `obj[name]` lookups find for tools named
// like them (HASHING.md §7 item 11).
var objectPrototypeProps = map[string]bool{
	"constructor": true, "hasOwnProperty": true, "isPrototypeOf": true, "propertyIsEnumerable": true,
	"toLocaleString": true, "toString": true, "valueOf": true, "__defineGetter__": true,
	"__defineSetter__": true, "__lookupGetter__": true, "__lookupSetter__": true, "__proto__": true,
}

// ToolRefs is resolveRuntimeToolRefs: the enabled names stable-sorted by
// collation (duplicates kept), each with its static hash — or, without one,
// the hash of its fallback spec — wrapped in a binding hash when the tool
// has an augment. Names with neither are skipped.
//
// Quirks of the reference kept on purpose: with an augments object, a tool
// named like an Object.prototype member ("toString", "constructor", …) and
// no own augment gets the inherited function as its augment, so its binding
// payload omits runtimeBinding ("__proto__" gets {}); a fallback lookup of
// such a name throws, reported here as an error.
func (r *Runtime) ToolRefs() ([]ToolRef, error) {
	names := sortedStrings(r.EnabledToolNames)
	refs := make([]ToolRef, 0, len(names))
	for _, name := range names {
		aug, hasAug := r.augment(name)
		h := r.NameToStaticHash[name]
		if h == "" {
			spec, own := r.ToolsFallback[name]
			if !own || spec == nil {
				if objectPrototypeProps[name] {
					return nil, fmt.Errorf("runtime tool %q: the reference reads Object.prototype.%s as its fallback spec and throws", name, name)
				}
				continue
			}
			var err error
			if h, err = spec.Hash(); err != nil {
				return nil, err
			}
		}
		if hasAug {
			var err error
			if h, err = ToolBindingHash(h, aug); err != nil {
				return nil, fmt.Errorf("runtime tool %q: %w", name, err)
			}
		}
		refs = append(refs, ToolRef{ToolKey: name, ToolHash: h})
	}
	return refs, nil
}

func (r *Runtime) augment(name string) (canonical.Value, bool) {
	if r.Augments == nil {
		return canonical.Value{}, false
	}
	if v, own := r.Augments[name]; own {
		return v, !IsUndefined(v)
	}
	if objectPrototypeProps[name] {
		if name == "__proto__" {
			return canonical.Value{Kind: canonical.Object}, true
		}
		return canonical.Value{Kind: canonical.Object, Obj: []canonical.Member{{Key: markFunction, Value: str(name)}}}, true
	}
	return canonical.Value{}, false
}

// Hash is computeRuntimeHash.
func (r *Runtime) Hash() (string, error) {
	refs, err := r.ToolRefs()
	if err != nil {
		return "", err
	}
	return hashTree("", "", func(t *tree) (canonical.Value, error) { return runtimePayload(t, refs), nil })
}

// RuntimePayload is runtimeCapabilityCanonicalPayload: {kind:"runtime",
// tools:[{name, hash}]} in the given order.
func RuntimePayload(refs []ToolRef) canonical.Value { return runtimePayload(new(tree), refs) }

func runtimePayload(t *tree, refs []ToolRef) canonical.Value {
	arr := t.values(len(refs))
	for i, r := range refs {
		arr[i] = t.object(member("hash", str(r.ToolHash)), member("name", str(r.ToolKey)))
	}
	return t.object(member("kind", str("runtime")), member("tools", canonical.Value{Kind: canonical.Array, Arr: arr}))
}

// ToolBindingPayload is {kind:"runtime_tool_binding", baseToolHash,
// runtimeBinding}; binding may hold markers (a function binding drops the
// key, as JSON.stringify does).
func ToolBindingPayload(base string, binding canonical.Value) (canonical.Value, error) {
	return toolBindingPayload(new(tree), base, binding)
}

func toolBindingPayload(t *tree, base string, binding canonical.Value) (canonical.Value, error) {
	var buf [3]canonical.Member
	ms := append(buf[:0], member("baseToolHash", str(base)), member("kind", str("runtime_tool_binding")))
	b, ok, err := plain(binding, 0)
	if err != nil {
		return canonical.Value{}, err
	}
	if ok {
		ms = append(ms, member("runtimeBinding", b))
	}
	return t.object(ms...), nil
}

// ToolBindingHash hashes ToolBindingPayload.
func ToolBindingHash(base string, binding canonical.Value) (string, error) {
	return hashTree("", "", func(t *tree) (canonical.Value, error) { return toolBindingPayload(t, base, binding) })
}
