package fingerprint

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/canonical/collate"
)

// Every fingerprint payload (tools, toolkits, dynamic toolkits, agents,
// runtimes, runtime tool bindings, invocations) has fixed field names, so their khoralabs key order is known in advance; the
// writers below emit their canonical bytes directly instead of building a
// canonical.Value tree and sorting its keys. Only what the caller supplies
// is sorted at run time (instruction lines, policy ids, member names), and
// user JSON (a toJSONSchema() result, a schema version) goes through the
// khoralabs profile. Each writer must produce exactly the bytes of the
// khoralabs form of the matching *Payload function; TestDirectWriters and
// FuzzDirectWriters hold them to that.
//
// Field orders (collation order of the keys, checked by TestFieldOrders):
//
//	tool:           description instructions kind name policies policyBindings schema
//	policyBinding:  executeBinding id
//	schema:         vendor version
//	toolkit:        instructions kind members name
//	member:         hash name
//	dynamicToolkit: instructions kind name policies
//	agent:          agentInstructions rootComposableHash
//	runtime:        kind tools; tool: hash name
//	binding:        baseToolHash kind runtimeBinding
//	invocation:     context kind

// hasher holds the output buffer and the sort scratch space of one hash.
type hasher struct {
	enc     canonical.KhoralabsEncoder
	b       []byte
	err     error // first invalid string met by str
	sorter  collate.Sorter
	perm    []int32
	strs    []string
	digests [][32]byte
}

var hasherPool = sync.Pool{New: func() any { return &hasher{b: make([]byte, 0, 1024)} }}

func getHasher() *hasher { return hasherPool.Get().(*hasher) }

func putHasher(h *hasher) {
	if cap(h.b) > 1<<20 || cap(h.strs) > 1<<16 {
		return // do not pin huge buffers in the pool
	}
	h.b, h.err = h.b[:0], nil
	clear(h.strs[:cap(h.strs)]) // do not keep the caller's strings alive
	hasherPool.Put(h)
}

// hexString returns the lowercase hex SHA-256 of the bytes written.
func (h *hasher) hexString() string {
	sum := sha256.Sum256(h.b)
	return hexDigest(&sum)
}

// hexDigest is hex.EncodeToString(sum[:]) (see appendHex), in a string
// that owns its only copy of the digits.
func hexDigest(sum *[32]byte) string {
	buf := appendHex(make([]byte, 0, 64), sum)
	return unsafe.String(unsafe.SliceData(buf), len(buf))
}

// appendHex is hex.AppendEncode(b, sum[:]), four bytes at a time: each
// byte of a 32-bit word is spread to a 16-bit lane, its high nibble in the
// lane's high byte (written first) and its low nibble in the low one, and
// every nibble is turned into its digit at once ('0' + n, plus
// 'a'-'0'-10 from 10 on).
func appendHex(b []byte, sum *[32]byte) []byte {
	at := len(b)
	b = slices.Grow(b, 64)[:at+64]
	d := (*[64]byte)(b[at:])
	for i := range 8 {
		v := uint64(binary.BigEndian.Uint32(sum[4*i:]))
		v = (v | v<<16) & 0x0000ffff0000ffff
		v = (v | v<<8) & 0x00ff00ff00ff00ff
		n := (v>>4&0x000f000f000f000f)<<8 | v&0x000f000f000f000f
		n += 0x3030303030303030 + (n+0x0606060606060606)>>4&0x0101010101010101*('a'-'0'-10)
		binary.BigEndian.PutUint64(d[8*i:], n)
	}
	return b
}

// sorted stable-sorts the indexes 0…len(strs)-1 by collation of strs and
// returns them (valid until the next call).
func (h *hasher) sorted(strs []string) []int32 {
	h.perm = h.perm[:0]
	for i := range strs {
		h.perm = append(h.perm, int32(i))
	}
	h.sorter.Sort(h.perm, strs)
	return h.perm
}

func isMarkerKey(k string) bool {
	if len(k) == 0 || k[0] != '$' {
		return false
	}
	switch k {
	case markUndefined, markFunction, markSymbol, markDate, markNumber, markBigInt, markAncestor, markLiteral:
		return true
	}
	return false
}

// plain appends the khoralabs form of v with its markers resolved
// (hashPlainObject's bytes); ok is false, with nothing appended, when v
// vanishes (undefined, a function, a symbol). Plain JSON is written in one
// pass; only a document that turns out to hold a marker is copied by plain.
func (h *hasher) plain(b []byte, v *canonical.Value) (out []byte, ok bool, err error) {
	switch v.Kind { // scalars (a schema version, a binding) need no encoder
	case canonical.String:
		out, err = canonical.AppendJSString(b, v.Str)
		return out, err == nil, err
	case canonical.Number:
		out, err = canonical.AppendJSNumberLiteral(b, v.Str)
		return out, err == nil, err
	}
	start := len(b)
	out, stopped, err := h.enc.AppendUntil(b, v, isMarkerKey)
	if err != nil || !stopped {
		return out, err == nil, err
	}
	p, ok, err := plain(*v, 0)
	if err != nil || !ok {
		return out[:start], false, err
	}
	out, _, err = h.enc.AppendUntil(out[:start], &p, nil)
	return out, err == nil, err
}

// str appends s as a JSON string. Invalid UTF-8 (possible only in
// hand-built values) is remembered in h.err, which every writer reports
// when it is done, so the writers need not check each string.
func (h *hasher) str(b []byte, s string) []byte {
	out, err := canonical.AppendJSString(b, s)
	if err != nil && h.err == nil {
		h.err = fmt.Errorf("string %q: %w", s, err)
	}
	return out
}

// strs appends ss as a JSON array in the order of perm (nil: as given).
func (h *hasher) strArray(b []byte, ss []string, perm []int32) []byte {
	b = append(b, '[')
	for i := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		if perm != nil {
			b = h.str(b, ss[perm[i]])
		} else {
			b = h.str(b, ss[i])
		}
	}
	return append(b, ']')
}

// done finishes a writer: it stores b and returns err, or else the first
// invalid string met.
func (h *hasher) done(b []byte, err error) error {
	h.b = b
	if err == nil {
		err, h.err = h.err, nil
	}
	return err
}

// schema appends `,"schema":…` for s, or nothing when schemaToHashInput
// is undefined.
func (h *hasher) schema(b []byte, s Schema) ([]byte, error) {
	mark := len(b)
	b = append(b, `,"schema":`...)
	if s.JSONSchema != nil {
		b, ok, err := h.plain(b, s.JSONSchema)
		if err != nil {
			return b[:mark], fmt.Errorf("schema: %w", err)
		}
		if !ok {
			return b[:mark], nil
		}
		return b, nil
	}
	b = append(b, '{')
	if s.Vendor != nil {
		b = append(b, `"vendor":`...)
		b = h.str(b, *s.Vendor)
	}
	if s.Version != nil {
		at := len(b)
		if s.Vendor != nil {
			b = append(b, ',')
		}
		b = append(b, `"version":`...)
		b, ok, err := h.plain(b, s.Version)
		if err != nil {
			return b[:mark], fmt.Errorf("schema version: %w", err)
		}
		if !ok {
			b = b[:at]
		}
		return append(b, '}'), nil
	}
	return append(b, '}'), nil
}

// appendStatic writes Tool.StaticPayload's canonical bytes.
func (t *Tool) appendStatic(h *hasher) error {
	b := append(h.b, `{"description":`...)
	if t.Description == nil {
		b = append(b, "null"...)
	} else {
		b = h.str(b, *t.Description)
	}
	b = append(b, `,"instructions":`...)
	b = h.strArray(b, t.Instructions, h.sorted(t.Instructions))
	b = append(b, `,"kind":"tool","name":`...)
	b = h.str(b, t.Name)
	// One stable sort by id orders both the policy ids and the bindings.
	h.strs = h.strs[:0]
	for _, p := range t.Policies {
		h.strs = append(h.strs, p.ID)
	}
	perm := h.sorted(h.strs)
	b = append(b, `,"policies":`...)
	b = h.strArray(b, h.strs, perm)
	if len(t.Policies) > 0 {
		b = append(b, `,"policyBindings":[`...)
		for i, x := range perm {
			if i > 0 {
				b = append(b, ',')
			}
			p := &t.Policies[x]
			b = append(b, `{"executeBinding":`...)
			if p.ExecuteBinding == nil {
				b = append(b, `"live"`...)
			} else {
				b = h.str(b, *p.ExecuteBinding)
			}
			b = append(b, `,"id":`...)
			b = h.str(b, p.ID)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b, err := h.schema(b, t.InputSchema)
	if err := h.done(append(b, '}'), err); err != nil {
		return fmt.Errorf("tool %q: %w", t.Name, err)
	}
	return nil
}

// appendSpec writes the canonical bytes of specPayload, the payload of an
// evaluated or wire tool spec (no policyBindings): desc nil is null, lines
// are sorted here, ids are written as given.
func (h *hasher) appendSpec(name string, desc *string, schema Schema, lines, ids []string) error {
	b := append(h.b, `{"description":`...)
	if desc == nil {
		b = append(b, "null"...)
	} else {
		b = h.str(b, *desc)
	}
	b = append(b, `,"instructions":`...)
	b = h.strArray(b, lines, h.sorted(lines))
	b = append(b, `,"kind":"tool","name":`...)
	b = h.str(b, name)
	b = append(b, `,"policies":`...)
	b = h.strArray(b, ids, nil)
	b, err := h.schema(b, schema)
	if err := h.done(append(b, '}'), err); err != nil {
		return fmt.Errorf("tool %q: %w", name, err)
	}
	return nil
}

// appendStatic writes Toolkit.StaticPayload's canonical bytes. Each member
// is hashed once, into a buffer of its own.
func (k *Toolkit) appendStatic(h *hasher) error {
	m := getHasher()
	defer putHasher(m)
	digests := h.digests[:0]
	names := h.strs[:0]
	for _, c := range k.Members {
		m.b = m.b[:0]
		if err := c.appendStatic(m); err != nil {
			return fmt.Errorf("toolkit %q: %w", k.Name, err)
		}
		digests = append(digests, sha256.Sum256(m.b))
		names = append(names, c.ComposableName())
	}
	h.digests, h.strs = digests, names
	b := append(h.b, `{"instructions":`...)
	if k.Instructions == nil {
		b = append(b, "null"...)
	} else {
		b = h.strArray(b, k.Instructions, nil)
	}
	b = append(b, `,"kind":"toolkit","members":[`...)
	for i, x := range h.sorted(names) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"hash":"`...)
		b = appendHex(b, &digests[x])
		b = append(b, `","name":`...)
		b = h.str(b, names[x])
		b = append(b, '}')
	}
	b = append(b, `],"name":`...)
	b = h.str(b, k.Name)
	if err := h.done(append(b, '}'), nil); err != nil {
		return fmt.Errorf("toolkit %q: %w", k.Name, err)
	}
	return nil
}

// appendStatic writes DynamicToolkit.StaticPayload's canonical bytes.
func (k *DynamicToolkit) appendStatic(h *hasher) error {
	b := append(h.b, `{"instructions":`...)
	if k.Instructions == nil {
		b = append(b, "null"...)
	} else {
		b = h.strArray(b, k.Instructions, nil)
	}
	b = append(b, `,"kind":"dynamicToolkit","name":`...)
	b = h.str(b, k.Name)
	h.strs = h.strs[:0]
	for _, p := range k.Policies {
		h.strs = append(h.strs, p.ID)
	}
	b = append(b, `,"policies":`...)
	b = h.strArray(b, h.strs, h.sorted(h.strs))
	if err := h.done(append(b, '}'), nil); err != nil {
		return fmt.Errorf("dynamic toolkit %q: %w", k.Name, err)
	}
	return nil
}

// hashStatic is the static hash of c through its direct writer.
func hashStatic(c Composable) (string, error) { return hashWith(c.appendStatic) }

// appendStatic writes RegisteredAgent.StaticPayload's canonical bytes.
func (a *RegisteredAgent) appendStatic(h *hasher) error {
	if a.Root == nil {
		return fmt.Errorf("agent %q: no root composable", a.AgentID)
	}
	m := getHasher()
	defer putHasher(m)
	if err := a.Root.appendStatic(m); err != nil {
		return fmt.Errorf("agent %q: %w", a.AgentID, err)
	}
	root := sha256.Sum256(m.b)
	b := append(h.b, `{"agentInstructions":[`...)
	n := 0
	for _, s := range a.Instructions {
		if s = JSTrim(s); s != "" {
			if n > 0 {
				b = append(b, ',')
			}
			b = h.str(b, s)
			n++
		}
	}
	b = append(b, `],"rootComposableHash":"`...)
	b = appendHex(b, &root)
	if err := h.done(append(b, '"', '}'), nil); err != nil {
		return fmt.Errorf("agent %q: %w", a.AgentID, err)
	}
	return nil
}

// appendRuntime writes RuntimePayload(refs)'s canonical bytes.
func (h *hasher) appendRuntime(refs []ToolRef) error {
	b := append(h.b, `{"kind":"runtime","tools":[`...)
	for i := range refs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"hash":`...)
		b = h.str(b, refs[i].ToolHash)
		b = append(b, `,"name":`...)
		b = h.str(b, refs[i].ToolKey)
		b = append(b, '}')
	}
	return h.done(append(b, ']', '}'), nil)
}

// appendBinding writes ToolBindingPayload(base, binding)'s canonical bytes.
func (h *hasher) appendBinding(base string, binding *canonical.Value) error {
	b := append(h.b, `{"baseToolHash":`...)
	b = h.str(b, base)
	b = append(b, `,"kind":"runtime_tool_binding"`...)
	mark := len(b)
	b = append(b, `,"runtimeBinding":`...)
	b, ok, err := h.plain(b, binding)
	if err != nil {
		return h.done(b[:mark], err)
	}
	if !ok {
		b = b[:mark]
	}
	return h.done(append(b, '}'), nil)
}

// appendInvocation writes InvocationPayload(ctx)'s canonical bytes; ctx is
// a normalized context (no markers).
func (h *hasher) appendInvocation(ctx *canonical.Value) error {
	b := append(h.b, `{"context":`...)
	b, err := canonical.Khoralabs.AppendCanonical(b, *ctx)
	if err != nil {
		return h.done(b, err)
	}
	return h.done(append(b, `,"kind":"invocation"}`...), nil)
}

// hashWith hashes what write writes.
func hashWith(write func(h *hasher) error) (string, error) {
	h := getHasher()
	defer putHasher(h)
	if err := write(h); err != nil {
		return "", err
	}
	return h.hexString(), nil
}
