package govalue

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/capmesh/capmesh/canonical"
)

// maxGoDepth bounds the direct walk over maps and slices, so that a cyclic
// map[string]any is an error instead of endless recursion.
const maxGoDepth = 1000

// FromGo returns the tree of a Go value as encoding/json would write it, so
// that packages can canonicalize their own structs: for every v,
// FromGo(v) equals canonical.Parse(json.Marshal(v)).
//
// The common dynamic types — nil, bool, string, json.Number, the integer and
// float types, map[string]any, []any, []string, json.RawMessage,
// canonical.Value — are
// converted directly, without an encoding round trip; anything else (structs,
// types with MarshalJSON, other maps and slices) goes through json.Marshal
// and canonical.Parse. Consequences worth knowing:
//   - map keys come out in byte order of the Go keys, as encoding/json
//     writes them;
//   - a float64 holding an integral value (3.0) becomes the integer literal
//     "3", which Python-based profiles write as an int; use
//     json.Number("3.0") to get a Python float;
//   - NaN and ±Inf are errors;
//   - invalid UTF-8 in strings becomes U+FFFD, as in encoding/json;
//   - []byte becomes a base64 string, as in encoding/json.
//
// The nodes of a tree built from a map or slice share a few backing arrays
// (see canonical.Parse): any part of the result keeps those arrays alive.
func FromGo(v any) (canonical.Value, error) {
	switch t := v.(type) {
	case map[string]any:
		if t != nil {
			return buildGo(t)
		}
	case []any:
		if t != nil {
			return buildGo(t)
		}
	}
	return fromGo(v, 0)
}

// fromGo converts a value that is not a map[string]any or []any root (or is
// a nil one): scalars, []string, canonical.Value, json.RawMessage, and
// through
// encoding/json everything else.
func fromGo(v any, depth int) (canonical.Value, error) {
	if depth > maxGoDepth {
		return canonical.Value{}, errGoDepth
	}
	switch t := v.(type) {
	case nil:
		return canonical.Value{Kind: canonical.Null}, nil
	case canonical.Value:
		return t, nil
	case *canonical.Value:
		if t == nil {
			return canonical.Value{Kind: canonical.Null}, nil
		}
		return *t, nil
	case bool:
		return canonical.Value{Kind: canonical.Bool, Bool: t}, nil
	case string:
		return canonical.Value{Kind: canonical.String, Str: validString(t)}, nil
	case json.Number:
		if !validNumber(string(t)) {
			return canonical.Value{}, fmt.Errorf("canonical: FromGo: invalid json.Number %q", string(t))
		}
		return canonical.Value{Kind: canonical.Number, Str: string(t)}, nil
	case json.RawMessage:
		if t == nil {
			return canonical.Value{Kind: canonical.Null}, nil
		}
		return canonical.Parse(t)
	case []string:
		if t == nil {
			return canonical.Value{Kind: canonical.Null}, nil
		}
		arr := make([]canonical.Value, len(t))
		for i, x := range t {
			arr[i] = canonical.Value{Kind: canonical.String, Str: validString(x)}
		}
		return canonical.Value{Kind: canonical.Array, Arr: arr}, nil
	case map[string]any, []any: // nil
		return canonical.Value{Kind: canonical.Null}, nil
	}
	if lit, ok := appendGoNumber(nil, v); ok {
		if lit == nil {
			return canonical.Value{}, fmt.Errorf("canonical: FromGo: unsupported value %v", v)
		}
		return canonical.Value{Kind: canonical.Number, Str: string(lit)}, nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return canonical.Value{}, fmt.Errorf("canonical: FromGo: %w", err)
	}
	return canonical.Parse(data)
}

// validNumber reports whether lit is exactly one JSON number: the
// literal Parse reads it as.
func validNumber(lit string) bool {
	v, err := canonical.Parse([]byte(lit))
	return err == nil && v.Kind == canonical.Number && v.Str == lit
}

var errGoDepth = fmt.Errorf("canonical: FromGo: nesting deeper than %d (cyclic value?)", maxGoDepth)

// appendGoNumber appends the literal encoding/json writes for a Go integer
// or float and reports whether v is one. For NaN and ±Inf it returns nil,
// true.
func appendGoNumber(b []byte, v any) ([]byte, bool) {
	switch t := v.(type) {
	case int:
		return strconv.AppendInt(b, int64(t), 10), true
	case int8:
		return strconv.AppendInt(b, int64(t), 10), true
	case int16:
		return strconv.AppendInt(b, int64(t), 10), true
	case int32:
		return strconv.AppendInt(b, int64(t), 10), true
	case int64:
		return strconv.AppendInt(b, t, 10), true
	case uint:
		return strconv.AppendUint(b, uint64(t), 10), true
	case uint8:
		return strconv.AppendUint(b, uint64(t), 10), true
	case uint16:
		return strconv.AppendUint(b, uint64(t), 10), true
	case uint32:
		return strconv.AppendUint(b, uint64(t), 10), true
	case uint64:
		return strconv.AppendUint(b, t, 10), true
	case uintptr:
		return strconv.AppendUint(b, uint64(t), 10), true
	case float64:
		return appendGoFloat(b, t, 64), true
	case float32:
		return appendGoFloat(b, float64(t), 32), true
	}
	return nil, false
}

// appendGoFloat writes f the way encoding/json does, so that the direct
// walk and the json.Marshal fallback agree on every literal. NaN and ±Inf
// give nil.
func appendGoFloat(b []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	// Fast path: every integer of magnitude below 2^53 is its own double,
	// so the shortest digits of a whole float64 there (not -0) are its
	// integer digits. (Not so for float32, whose neighbours are further
	// apart.)
	if i := int64(f); bits == 64 && float64(i) == f && i > -1<<53 && i < 1<<53 && (i != 0 || !math.Signbit(f)) {
		return strconv.AppendInt(b, i, 10)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		// Clean up e-09 to e-9, as encoding/json does.
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// validString replaces each invalid UTF-8 byte with U+FFFD, as encoding/json
// does when it writes a string.
func validString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return string(b)
}

// goBuilder converts a map[string]any or []any tree in one walk. A Go
// container knows its length before its elements are visited, so each one
// takes its exact span from a chunk of Values or Members. The first chunks
// are sized from the previous document built with this builder, so that a
// steady stream of similar documents costs one chunk of each, but at most
// 16 elements per member of the root (capHints); later chunks double.
// Number literals are written into one buffer that becomes one string at
// the end.
type goBuilder struct {
	vals  []canonical.Value  // the unused rest of the current chunk
	mems  []canonical.Member // the unused rest of the current chunk
	nums  []byte
	fixes []numFix
	// keys and elems are stacks of the entries of the maps being visited,
	// perm a stack of their sorted orders.
	keys  []string
	elems []any
	perm  []int32
	// usedV and usedM count what this document took; hintV and hintM
	// size the first chunks of the next one.
	usedV, usedM, hintV, hintM int
}

// numFix is a Number whose literal is nums[a:b].
type numFix struct {
	v    *canonical.Value
	a, b int
}

var goPool = sync.Pool{New: func() any { return &goBuilder{hintV: 16, hintM: 16} }}

// maxChunk is the largest chunk sized from a hint (72 KiB of Values, 88
// KiB of Members); a single container larger than that gets a chunk of its
// own size.
const maxChunk = 1024

func buildGo(x any) (canonical.Value, error) {
	g := goPool.Get().(*goBuilder)
	var out canonical.Value
	var err error
	switch t := x.(type) {
	case map[string]any:
		g.capHints(len(t))
		out.Kind = canonical.Object
		out.Obj, err = g.object(t, 0)
	case []any:
		g.capHints(len(t))
		out.Kind = canonical.Array
		out.Arr, err = g.array(t, 0)
	}
	if err == nil && len(g.nums) > 0 {
		lits := string(g.nums)
		for _, f := range g.fixes {
			f.v.Str = lits[f.a:f.b]
		}
	}
	g.release()
	if err != nil {
		return canonical.Value{}, err
	}
	return out, nil
}

// capHints bounds the first chunks by the size of the root container, so
// that a small document built after a large one does not get (and keep
// alive) a chunk sized for the large one.
func (g *goBuilder) capHints(rootLen int) {
	c := 16 * (rootLen + 1)
	g.hintV = min(g.hintV, c)
	g.hintM = min(g.hintM, c)
}

// release readies g for the next document and returns it to the pool. The
// rest of the current chunks is dropped: handing it to the next document
// would tie the lifetimes of unrelated trees together.
func (g *goBuilder) release() {
	g.hintV = min(max(g.usedV, 16), maxChunk)
	g.hintM = min(max(g.usedM, 16), maxChunk)
	g.usedV, g.usedM = 0, 0
	g.vals, g.mems = nil, nil
	// Drop every reference to the caller's values.
	clear(g.fixes)
	clear(g.keys[:cap(g.keys)])
	clear(g.elems[:cap(g.elems)])
	if cap(g.nums) > 1<<16 || cap(g.fixes) > 1<<14 || cap(g.keys) > 1<<14 || cap(g.perm) > 1<<14 {
		return
	}
	g.nums, g.fixes = g.nums[:0], g.fixes[:0]
	g.keys, g.elems, g.perm = g.keys[:0], g.elems[:0], g.perm[:0]
	goPool.Put(g)
}

func (g *goBuilder) takeVals(n int) []canonical.Value {
	g.usedV += n
	if n == 0 {
		return []canonical.Value{} // as Parse reads [], without allocating
	}
	if n > len(g.vals) {
		if n >= g.hintV {
			return make([]canonical.Value, n)
		}
		g.vals = make([]canonical.Value, g.hintV)
		g.hintV = min(2*g.hintV, maxChunk)
	}
	r := g.vals[:n:n]
	g.vals = g.vals[n:]
	return r
}

func (g *goBuilder) takeMems(n int) []canonical.Member {
	g.usedM += n
	if n == 0 {
		return []canonical.Member{}
	}
	if n > len(g.mems) {
		if n >= g.hintM {
			return make([]canonical.Member, n)
		}
		g.mems = make([]canonical.Member, g.hintM)
		g.hintM = min(2*g.hintM, maxChunk)
	}
	r := g.mems[:n:n]
	g.mems = g.mems[n:]
	return r
}

func (g *goBuilder) array(t []any, depth int) ([]canonical.Value, error) {
	arr := g.takeVals(len(t))
	for i, x := range t {
		if err := g.fill(&arr[i], x, depth+1); err != nil {
			return nil, err
		}
	}
	return arr, nil
}

func (g *goBuilder) object(t map[string]any, depth int) ([]canonical.Member, error) {
	// encoding/json sorts a map by its Go keys, before replacing invalid
	// UTF-8 in them. The entries go to two stacks and only a permutation
	// of int32s is sorted, so that sorting moves no pointers.
	base := len(g.keys)
	for k, x := range t {
		g.keys = append(g.keys, k)
		g.elems = append(g.elems, x)
	}
	n := len(g.keys) - base
	pbase := len(g.perm)
	for i := range n {
		g.perm = append(g.perm, int32(base+i))
	}
	keys, perm := g.keys, g.perm[pbase:]
	if n <= 12 {
		for i := 1; i < n; i++ {
			x := perm[i]
			j := i
			for ; j > 0 && keys[perm[j-1]] > keys[x]; j-- {
				perm[j] = perm[j-1]
			}
			perm[j] = x
		}
	} else {
		slices.SortFunc(perm, func(a, b int32) int { return strings.Compare(keys[a], keys[b]) })
	}
	obj := g.takeMems(n)
	for i := range obj {
		// Index again each time: visiting a child may grow the stacks.
		x := g.perm[pbase+i]
		obj[i].Key = validString(g.keys[x])
		if err := g.fill(&obj[i].Value, g.elems[x], depth+1); err != nil {
			return nil, err
		}
	}
	g.keys, g.elems, g.perm = g.keys[:base], g.elems[:base], g.perm[:pbase]
	return obj, nil
}

// fill converts x into *v, which is zero and lives in a chunk.
func (g *goBuilder) fill(v *canonical.Value, x any, depth int) error {
	if depth > maxGoDepth {
		return errGoDepth
	}
	var err error
	switch t := x.(type) {
	case nil:
	case string:
		v.Kind, v.Str = canonical.String, validString(t)
	case float64:
		return g.number(v, appendGoFloat(g.nums, t, 64), x)
	case bool:
		v.Kind, v.Bool = canonical.Bool, t
	case map[string]any:
		if t != nil {
			v.Kind = canonical.Object
			v.Obj, err = g.object(t, depth)
		}
	case []any:
		if t != nil {
			v.Kind = canonical.Array
			v.Arr, err = g.array(t, depth)
		}
	case []string:
		if t != nil {
			arr := g.takeVals(len(t))
			for i, s := range t {
				arr[i].Kind, arr[i].Str = canonical.String, validString(s)
			}
			v.Kind, v.Arr = canonical.Array, arr
		}
	default:
		if lit, ok := appendGoNumber(g.nums, x); ok {
			return g.number(v, lit, x)
		}
		*v, err = fromGo(x, depth)
	}
	return err
}

// number records v as the Number whose literal lit has just been appended
// to g.nums (nil: x is NaN or ±Inf).
func (g *goBuilder) number(v *canonical.Value, lit []byte, x any) error {
	if lit == nil {
		return fmt.Errorf("canonical: FromGo: unsupported value %v", x)
	}
	v.Kind = canonical.Number
	g.fixes = append(g.fixes, numFix{v, len(g.nums), len(lit)})
	g.nums = lit
	return nil
}
