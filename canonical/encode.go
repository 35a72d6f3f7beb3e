package canonical

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// numberStyle says how a profile writes numbers.
type numberStyle uint8

const (
	// numPyIntOnly: Python ints written exactly; any literal with '.', 'e'
	// or 'E' (a Python float) is ErrFloat.
	numPyIntOnly numberStyle = iota
	// numPyRepr: Python ints written exactly, floats as Python repr.
	numPyRepr
	// numES: every number is an IEEE double written as ECMAScript
	// Number.prototype.toString does (RFC 8785 §3.2.2.3).
	numES
	// numESIntOnly: like numES, but floats are ErrFloat and integers must be
	// exactly representable (|n| <= 2^53-1).
	numESIntOnly
)

// style is a concrete profile. All built-in profiles are styles; they differ
// in separators, string escaping, key order and number rules.
type style struct {
	name      string
	itemSep   string // between array elements and object members
	keySep    string // between a key and its value
	ascii     bool   // Python ensure_ascii=True escaping; else raw UTF-8 (RFC 8785)
	utf16Keys bool   // sort keys by UTF-16 code units; else by code point
	numbers   numberStyle
}

func (st *style) Name() string { return st.name }

// maxEncodeDepth bounds recursion over hand-built trees (parsed trees are
// already bounded by ParseOptions.MaxDepth).
const maxEncodeDepth = 10000

// errEncodeTooDeep is every encoder's refusal of a tree nested deeper than
// maxEncodeDepth.
var errEncodeTooDeep = fmt.Errorf("%w: nesting deeper than %d", ErrTooDeep, maxEncodeDepth)

type encoder struct {
	st *style
	// idx is a stack of member indexes: each object being written pushes a
	// permutation of its members in key order and pops it when done.
	idx []int32
}

var encPool = sync.Pool{New: func() any { return &encoder{idx: make([]int32, 0, 64)} }}

// AppendCanonical appends the canonical form of v to dst.
func (st *style) AppendCanonical(dst []byte, v Value) ([]byte, error) {
	e := encPool.Get().(*encoder)
	e.st = st
	dst, err := e.value(dst, v, 0)
	if _, ok := err.(*pathError); err != nil && !ok {
		err = &pathError{profile: st.name, err: err} // a top-level scalar
	}
	e.st = nil
	if cap(e.idx) <= 1<<16 {
		e.idx = e.idx[:0]
		encPool.Put(e)
	}
	return dst, err
}

func (e *encoder) value(b []byte, v Value, depth int) ([]byte, error) {
	switch v.Kind {
	case Null:
		return append(b, "null"...), nil
	case Bool:
		if v.Bool {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	case Number:
		return e.number(b, v.Str)
	case String:
		if e.st.ascii {
			return appendASCIIString(b, v.Str)
		}
		return appendUTF8String(b, v.Str)
	case Array:
		if depth >= maxEncodeDepth {
			return b, errEncodeTooDeep
		}
		b = append(b, '[')
		for i, x := range v.Arr {
			if i > 0 {
				b = append(b, e.st.itemSep...)
			}
			var err error
			if b, err = e.value(b, x, depth+1); err != nil {
				return b, e.at(err, indexStep(i))
			}
		}
		return append(b, ']'), nil
	case Object:
		if depth >= maxEncodeDepth {
			return b, errEncodeTooDeep
		}
		return e.object(b, v.Obj, depth)
	default:
		return b, fmt.Errorf("%w: %d", ErrInvalidKind, v.Kind)
	}
}

// at turns err into a *pathError (once) and records one path step.
func (e *encoder) at(err error, step string) error {
	pe, ok := err.(*pathError)
	if !ok {
		pe = &pathError{profile: e.st.name, err: err}
	}
	pe.path = append(pe.path, step)
	return pe
}

func (e *encoder) object(b []byte, obj []Member, depth int) ([]byte, error) {
	n := len(obj)
	if n == 0 {
		return append(b, '{', '}'), nil
	}
	base := len(e.idx)
	for i := range n {
		e.idx = append(e.idx, int32(i))
	}
	order := e.idx[base : base+n]
	e.sortKeys(obj, order)
	for j := 1; j < n; j++ {
		if obj[order[j-1]].Key == obj[order[j]].Key {
			e.idx = e.idx[:base]
			return b, e.at(fmt.Errorf("%w %q", ErrDuplicateKey, obj[order[j]].Key), "")
		}
	}
	b = append(b, '{')
	for j := range n {
		// Re-slice on every step: writing a child may grow e.idx.
		m := &obj[e.idx[base+j]]
		if j > 0 {
			b = append(b, e.st.itemSep...)
		}
		var err error
		if e.st.ascii {
			b, err = appendASCIIString(b, m.Key)
		} else {
			b, err = appendUTF8String(b, m.Key)
		}
		if err != nil {
			e.idx = e.idx[:base]
			return b, e.at(fmt.Errorf("key: %w", err), keyStep(m.Key))
		}
		b = append(b, e.st.keySep...)
		if b, err = e.value(b, m.Value, depth+1); err != nil {
			e.idx = e.idx[:base]
			return b, e.at(err, keyStep(m.Key))
		}
	}
	e.idx = e.idx[:base]
	return append(b, '}'), nil
}

// sortKeys orders the member indexes in order by key: code point order
// (which is byte order of UTF-8 and WTF-8) or UTF-16 code unit order.
func (e *encoder) sortKeys(obj []Member, order []int32) {
	cmp := strings.Compare
	if e.st.utf16Keys {
		cmp = compareUTF16
	}
	// Input is often sorted already (documents written by a canonical
	// writer); insertion sort is linear then, and fastest for small objects.
	if len(order) <= 16 || isSortedBy(obj, order, cmp) {
		for i := 1; i < len(order); i++ {
			x := order[i]
			j := i
			for j > 0 && cmp(obj[order[j-1]].Key, obj[x].Key) > 0 {
				order[j] = order[j-1]
				j--
			}
			order[j] = x
		}
		return
	}
	slices.SortFunc(order, func(x, y int32) int { return cmp(obj[x].Key, obj[y].Key) })
}

func isSortedBy(obj []Member, order []int32, cmp func(a, b string) int) bool {
	for i := 1; i < len(order); i++ {
		if cmp(obj[order[i-1]].Key, obj[order[i]].Key) > 0 {
			return false
		}
	}
	return true
}

// The built-in profiles.
var (
	// ChpStableV1 is CHP's chp-stable-v1 (chp-v0.2.md §2): Python
	// json.dumps(obj, sort_keys=True) — separators ", " and ": ", keys by
	// code point, ASCII-only output with lowercase \uXXXX escapes — and no
	// non-integer numbers (rule 6): a literal with '.', 'e' or 'E' is
	// ErrFloat.
	ChpStableV1 Profile = &style{name: "chp-stable-v1", itemSep: ", ", keySep: ": ", ascii: true, numbers: numPyIntOnly}

	// PythonSortKeys is what CHP's Python reference actually computes for
	// chp-stable-v1: json.dumps(obj, sort_keys=True), floats included and
	// written as Python's repr writes them ("1.0", "1e-05", "1e+16"). Use it
	// only to check content that a peer hashed in violation of rule 6;
	// produce with ChpStableV1.
	PythonSortKeys Profile = &style{name: "python-sort-keys", itemSep: ", ", keySep: ": ", ascii: true, numbers: numPyRepr}

	// Genesis is the Genesis-Mesh RFC-005 signing form: Python
	// json.dumps(obj, sort_keys=True, separators=(",", ":")) with
	// ensure_ascii, Python float repr and exact integers. Timestamps must
	// already be in pydantic's rendering (see package canonical/pydantic).
	Genesis Profile = &style{name: "genesis", itemSep: ",", keySep: ":", ascii: true, numbers: numPyRepr}

	// JCS is RFC 8785, the JSON Canonicalization Scheme: compact, raw UTF-8
	// strings, keys by UTF-16 code unit, every number an IEEE double written
	// as ECMAScript writes it. Lone surrogates are ErrLoneSurrogate.
	JCS Profile = &style{name: "jcs", itemSep: ",", keySep: ":", utf16Keys: true, numbers: numES}

	// ChpJcsV1 is CHP's chp-jcs-v1: RFC 8785 over CHP's float-free content
	// (rule 6 retained). Non-integer literals are ErrFloat, and integers
	// beyond ±(2^53−1), which CHP's Python and TypeScript references write
	// differently, are ErrNumberRange.
	ChpJcsV1 Profile = &style{name: "chp-jcs-v1", itemSep: ",", keySep: ":", utf16Keys: true, numbers: numESIntOnly}
)

func init() {
	Register(ChpStableV1)
	Register(PythonSortKeys)
	Register(Genesis)
	Register(JCS, "rfc8785")
	Register(ChpJcsV1)
}
