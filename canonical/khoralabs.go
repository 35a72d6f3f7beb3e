package canonical

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"

	"github.com/capmesh/capmesh/canonical/collate"
)

// Khoralabs is the canonical form behind @khoralabs/agent-capabilities
// capability fingerprints: hashPlainObject's JSON.stringify(sortValue(x)).
//
//   - no whitespace; separators "," and ":";
//   - object keys: first the array-index keys ("0" … "4294967294" in
//     canonical decimal form) in ascending numeric order, because a
//     JavaScript object always lists them first; then every other key
//     stable-sorted by String.prototype.localeCompare under Node 20's
//     default (ICU root, CLDR 48) collation — see package collate. Keys that
//     collate equal ("é" and "e\u0301", "a" and "a\u0001") keep input order;
//   - strings as JSON.stringify writes them: \" \\ \b \t \n \f \r, other C0
//     controls as lowercase \u00xx, lone surrogates as lowercase \udxxx, and
//     everything else raw (DEL, U+2028/U+2029, '<', '>', '&', all
//     non-ASCII);
//   - every number is the IEEE double JSON.parse reads (integers beyond
//     2^53 lose precision as in JavaScript), written as Number::toString
//     writes it: -0 → 0, 1e21 → 1e+21, 1e-7 → 1e-7; a literal that
//     overflows a double is Infinity in JavaScript, which JSON.stringify
//     writes as null;
//   - duplicate keys (only possible in a hand-built tree; Parse rejects
//     them) are ErrDuplicateKey.
//
// JavaScript values that JSON cannot carry — undefined members, functions,
// Dates — are resolved before a tree reaches this profile (package
// fingerprint does that from its marker objects).
//
// This is not RFC 8785: keys are ordered by a locale collation, not by
// UTF-16 code units, array-index keys come first, and lone surrogates are
// escaped instead of rejected.
var Khoralabs Profile = khoralabs{}

func init() { Register(Khoralabs) }

type khoralabs struct{}

func (khoralabs) Name() string { return "khoralabs" }

// khEncoder writes one khoralabs document. It walks the tree through
// pointers (a Value is 72 bytes).
type khEncoder struct {
	// order is a stack of member orders: each object being written pushes
	// the indexes of its members in khoralabs order and pops them when
	// done.
	order []int32
	ko    keyOrderer
	// stop, when set, is asked about the key of every single-member object
	// (see AppendKhoralabsUntil).
	stop func(key string) bool
}

// errStopped unwinds AppendKhoralabsUntil's walk.
var errStopped = errors.New("stopped")

// keyOrderer holds the scratch space of KhoralabsKeyOrder.
type keyOrderer struct {
	sorter collate.Sorter
	keys   []string
}

var khPool = sync.Pool{New: func() any { return new(khEncoder) }}

// AppendCanonical appends the khoralabs canonical form of v to dst.
func (khoralabs) AppendCanonical(dst []byte, v Value) ([]byte, error) {
	out, _, err := AppendKhoralabsUntil(dst, &v, nil)
	return out, err
}

// AppendKhoralabsUntil appends the khoralabs canonical form of *v to dst,
// as Khoralabs.AppendCanonical does, unless v holds a single-member object
// whose key satisfies stop: then it stops there and returns stopped=true,
// and the bytes it appended are to be discarded. Package fingerprint hashes
// plain JSON with it in one pass, and resolves its marker objects
// ({"$undefined":true}, …) first only when a document turns out to have
// some.
func AppendKhoralabsUntil(dst []byte, v *Value, stop func(key string) bool) (out []byte, stopped bool, err error) {
	e := khPool.Get().(*khEncoder)
	e.stop = stop
	out, err = e.value(dst, v, 0)
	if err != nil {
		if err == errStopped {
			stopped, err = true, nil
		} else if _, ok := err.(*pathError); !ok {
			err = &pathError{profile: "khoralabs", err: err}
		}
	}
	e.stop, e.order = nil, e.order[:0]
	e.ko.forget()
	if cap(e.order) <= 1<<16 && cap(e.ko.keys) <= 1<<16 {
		khPool.Put(e) // do not keep a huge document's scratch space
	}
	return out, stopped, err
}

func khAt(err error, step string) error {
	if err == errStopped {
		return err // not an error: no path to build
	}
	pe, ok := err.(*pathError)
	if !ok {
		pe = &pathError{profile: "khoralabs", err: err}
	}
	pe.path = append(pe.path, step)
	return pe
}

func (e *khEncoder) value(b []byte, v *Value, depth int) ([]byte, error) {
	switch v.Kind {
	case String:
		return AppendJSString(b, v.Str)
	case Number:
		return appendJSNumber(b, v.Str)
	case Object:
		if depth >= maxEncodeDepth {
			return b, errEncodeTooDeep
		}
		return e.object(b, v.Obj, depth)
	case Array:
		if depth >= maxEncodeDepth {
			return b, errEncodeTooDeep
		}
		b = append(b, '[')
		for i := range v.Arr {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = e.value(b, &v.Arr[i], depth+1); err != nil {
				return b, khAt(err, indexStep(i))
			}
		}
		return append(b, ']'), nil
	case Null:
		return append(b, "null"...), nil
	case Bool:
		if v.Bool {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	default:
		return b, fmt.Errorf("%w: %d", ErrInvalidKind, v.Kind)
	}
}

// object writes obj with its members in khoralabs order (see
// KhoralabsKeyOrder).
func (e *khEncoder) object(b []byte, obj []Member, depth int) ([]byte, error) {
	if len(obj) == 0 {
		return append(b, '{', '}'), nil
	}
	if len(obj) == 1 && e.stop != nil && e.stop(obj[0].Key) {
		return b, errStopped
	}
	// On an error the document is abandoned, and with it the stack.
	base := len(e.order)
	for i := range obj {
		e.order = append(e.order, int32(i))
	}
	if err := e.ko.order(obj, e.order[base:]); err != nil {
		return b, khAt(err, "")
	}
	b = append(b, '{')
	for j := range obj {
		// Children push their orders above this one, and may move the
		// stack: read this object's order through e.order each time.
		m := &obj[e.order[base+j]]
		if j > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = AppendJSString(b, m.Key); err != nil {
			return b, khAt(fmt.Errorf("key: %w", err), keyStep(m.Key))
		}
		b = append(b, ':')
		if b, err = e.value(b, &m.Value, depth+1); err != nil {
			return b, khAt(err, keyStep(m.Key))
		}
	}
	e.order = e.order[:base]
	return append(b, '}'), nil
}

var keyOrderPool = sync.Pool{New: func() any { return new(keyOrderer) }}

// KhoralabsKeyOrder permutes order (indexes into obj, initially in input
// order) into the khoralabs member order: array-index keys ascending by
// value, then the other keys stable-sorted by collation (package collate).
// It reports ErrDuplicateKey if two members share a key.
func KhoralabsKeyOrder(obj []Member, order []int32) error {
	ko := keyOrderPool.Get().(*keyOrderer)
	err := ko.order(obj, order)
	ko.forget()
	keyOrderPool.Put(ko)
	return err
}

// forget clears the copies of keys ko holds, so that a pooled orderer
// keeps no document alive.
func (ko *keyOrderer) forget() { clear(ko.keys[:cap(ko.keys)]) }

func (ko *keyOrderer) order(obj []Member, order []int32) error {
	if len(order) < 2 || inOrder(obj, order) {
		return nil
	}
	// Partition: array-index keys to the front (their relative order is
	// fixed by value below), the rest keep input order.
	k := 0
	for i, x := range order {
		if c := obj[x].Key; len(c) > 0 && c[0] <= '9' && c[0] >= '0' {
			if _, ok := ArrayIndex(c); ok {
				copy(order[k+1:i+1], order[k:i])
				order[k] = x
				k++
			}
		}
	}
	idx, rest := order[:k], order[k:]
	if len(idx) > 1 {
		slices.SortFunc(idx, func(x, y int32) int {
			a, _ := ArrayIndex(obj[x].Key)
			c, _ := ArrayIndex(obj[y].Key)
			return cmp.Compare(a, c)
		})
		for i := 1; i < len(idx); i++ {
			if obj[idx[i-1]].Key == obj[idx[i]].Key {
				return fmt.Errorf("%w %q", ErrDuplicateKey, obj[idx[i]].Key)
			}
		}
	}
	if len(rest) < 2 {
		return nil
	}
	ko.keys = ko.keys[:0]
	for i := range obj {
		ko.keys = append(ko.keys, obj[i].Key)
	}
	ties := ko.sorter.Sort(rest, ko.keys)
	if !ties {
		return nil // no two keys collate equal, so none are the same
	}
	seen := make(map[string]struct{}, len(rest))
	for _, x := range rest {
		if _, dup := seen[obj[x].Key]; dup {
			return fmt.Errorf("%w %q", ErrDuplicateKey, obj[x].Key)
		}
		seen[obj[x].Key] = struct{}{}
	}
	return nil
}

// inOrder reports whether the keys of obj, taken in order, are already
// strictly ascending by collation with no array-index key among them, as
// payload builders and canonical documents write them: then they are in
// khoralabs order and none is a duplicate. It answers false whenever
// collate.QuickCompare cannot decide a pair.
func inOrder(obj []Member, order []int32) bool {
	for i, x := range order {
		k := obj[x].Key
		if k != "" && k[0] >= '0' && k[0] <= '9' {
			if _, isIndex := ArrayIndex(k); isIndex {
				return false
			}
		}
		if i > 0 {
			if r, ok := collate.QuickCompare(obj[order[i-1]].Key, k); !ok || r >= 0 {
				return false
			}
		}
	}
	return true
}

// ArrayIndex reports whether key is a JavaScript array index — the canonical
// decimal form of an integer 0 … 4294967294 (2³²−2) — and its value. Such
// keys are listed first, in numeric order, by every JavaScript object.
func ArrayIndex(key string) (uint32, bool) {
	if len(key) == 0 || key[0] > '9' || key[0] < '0' || len(key) > 10 || (len(key) > 1 && key[0] == '0') {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if n > math.MaxUint32-1 {
		return 0, false
	}
	return uint32(n), true
}

// AppendJSNumberLiteral appends the JSON number literal lit as
// JSON.stringify(JSON.parse(lit)) writes it: "1.0" → 1, "-0" → 0, "1e21" →
// 1e+21, "1e400" → null. A literal that is not RFC 8259 JSON is
// ErrInvalidNumber.
func AppendJSNumberLiteral(b []byte, lit string) ([]byte, error) { return appendJSNumber(b, lit) }

// appendJSNumber reads lit as JSON.parse does (a literal that overflows a
// double is ±Infinity) and writes the double as JSON.stringify does.
func appendJSNumber(b []byte, lit string) ([]byte, error) {
	if !validNumber(lit) {
		return b, fmt.Errorf("%w: %q", ErrInvalidNumber, lit)
	}
	if out, ok := appendShortInteger(b, lit); ok {
		return out, nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !math.IsInf(f, 0) {
		return b, fmt.Errorf("%w: %q", ErrInvalidNumber, lit)
	}
	return AppendJSNumber(b, f), nil
}

// AppendJSNumber appends f as JSON.stringify writes a number: ECMAScript
// Number::toString for finite values (-0 as 0), null for NaN and ±Infinity.
func AppendJSNumber(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	return appendES(b, f)
}
