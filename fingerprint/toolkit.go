package fingerprint

import (
	"fmt"
	"strings"

	"github.com/capmesh/capmesh/canonical"
)

// Composable is anything an agent is built from: a *Tool, a *Toolkit or a
// *DynamicToolkit.
type Composable interface {
	ComposableName() string
	StaticHash() (string, error)
	// composable keeps the set of composables to this package's types.
	composable()
}

// Toolkit is a toolkit(members, {name, instructions}) declaration.
type Toolkit struct {
	Name string
	// Instructions are hashed as given (not sorted, trimmed or split); nil
	// hashes as null.
	Instructions []string
	Members      []Composable
}

// ComposableName returns the toolkit's name.
func (k *Toolkit) ComposableName() string { return k.Name }

func instructionsOrNull(t *tree, ss []string) canonical.Value {
	if ss == nil {
		return null
	}
	return t.strings(ss)
}

// StaticPayload is the toolkit's pre-hash object: kind, name, instructions
// (null when absent) and members {name, hash} stable-sorted by name, each
// hash the member's own static hash.
func (k *Toolkit) StaticPayload() (canonical.Value, error) { return k.payload(new(tree)) }

func (k *Toolkit) payload(t *tree) (canonical.Value, error) {
	names := make([]string, len(k.Members))
	hashes := make([]string, len(k.Members))
	for i, m := range k.Members {
		h, err := m.StaticHash()
		if err != nil {
			return canonical.Value{}, fmt.Errorf("toolkit %q: %w", k.Name, err)
		}
		names[i], hashes[i] = m.ComposableName(), h
	}
	arr := t.values(len(names))
	for j, i := range t.collationOrder(names) {
		arr[j] = t.object(member("hash", str(hashes[i])), member("name", str(names[i])))
	}
	return t.object(
		member("instructions", instructionsOrNull(t, k.Instructions)),
		member("kind", str("toolkit")),
		member("members", canonical.Value{Kind: canonical.Array, Arr: arr}),
		member("name", str(k.Name)),
	), nil
}

// StaticHash is the toolkit's computeStaticHash(). Each member is hashed
// once.
func (k *Toolkit) StaticHash() (string, error) { return hashTree("toolkit", k.Name, k.payload) }

func (*Toolkit) composable() {}

// DynamicToolkit is a dynamicToolkit declaration. Its tools exist only at
// evaluation time and are not part of its static hash.
type DynamicToolkit struct {
	Name         string
	Instructions []string // hashed as given; nil hashes as null
	Policies     []Policy
	// Created are the members its create() returns in the evaluation a full
	// capability link describes. They are not part of the static hash.
	Created []Composable
}

// ComposableName returns the dynamic toolkit's name.
func (k *DynamicToolkit) ComposableName() string { return k.Name }

// StaticPayload is {kind:"dynamicToolkit", name, instructions, policies}
// with policy ids sorted by collation and no policyBindings.
func (k *DynamicToolkit) StaticPayload() (canonical.Value, error) { return k.payload(new(tree)) }

func (k *DynamicToolkit) payload(t *tree) (canonical.Value, error) {
	return t.object(
		member("instructions", instructionsOrNull(t, k.Instructions)),
		member("kind", str("dynamicToolkit")),
		member("name", str(k.Name)),
		member("policies", t.sortedStrings(policyIDs(k.Policies))),
	), nil
}

// StaticHash is the dynamic toolkit's computeStaticHash().
func (k *DynamicToolkit) StaticHash() (string, error) {
	return hashTree("dynamic toolkit", k.Name, k.payload)
}

func (*DynamicToolkit) composable() {}

// CollectToolStaticHashes walks root depth-first like the reference's
// collectToolStaticHashes: each tool maps its name to its static hash (a
// later tool with the same name overwrites), toolkits are walked in member
// order, and dynamic toolkits are not entered. names lists the tool names
// in first-seen order.
func CollectToolStaticHashes(root Composable) (hashes map[string]string, names []string, err error) {
	hashes = map[string]string{}
	var walk func(c Composable) error
	walk = func(c Composable) error {
		switch t := c.(type) {
		case *Tool:
			h, err := t.StaticHash()
			if err != nil {
				return err
			}
			if _, seen := hashes[t.Name]; !seen {
				names = append(names, t.Name)
			}
			hashes[t.Name] = h
		case *Toolkit:
			for _, m := range t.Members {
				if err := walk(m); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return hashes, names, walk(root)
}

// RegisteredAgent is a createRegisteredAgent declaration.
type RegisteredAgent struct {
	AgentID string
	Name    string
	// Instructions are trimmed with JavaScript's String.prototype.trim and
	// empty ones dropped; order is kept.
	Instructions []string
	Root         Composable
}

// StaticPayload is {rootComposableHash, agentInstructions}; the agent id,
// name and context are not hashed.
func (a *RegisteredAgent) StaticPayload() (canonical.Value, error) { return a.payload(new(tree)) }

func (a *RegisteredAgent) payload(t *tree) (canonical.Value, error) {
	if a.Root == nil {
		return canonical.Value{}, fmt.Errorf("agent %q: no root composable", a.AgentID)
	}
	h, err := a.Root.StaticHash()
	if err != nil {
		return canonical.Value{}, fmt.Errorf("agent %q: %w", a.AgentID, err)
	}
	lines := []string{}
	for _, s := range a.Instructions {
		if s = JSTrim(s); s != "" {
			lines = append(lines, s)
		}
	}
	return t.object(member("agentInstructions", t.strings(lines)), member("rootComposableHash", str(h))), nil
}

// StaticHash is the registered agent's staticHash.
func (a *RegisteredAgent) StaticHash() (string, error) {
	return hashTree("agent", a.AgentID, a.payload)
}

// JSTrim is String.prototype.trim: it removes WhiteSpace and
// LineTerminator code points (TAB, LF, VT, FF, CR, SPACE, U+00A0, U+1680,
// U+2000–U+200A, U+2028, U+2029, U+202F, U+205F, U+3000, U+FEFF) from both
// ends. Unlike strings.TrimSpace it keeps U+0085 and removes U+FEFF.
func JSTrim(s string) string { return strings.TrimFunc(s, isJSSpace) }

func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}
