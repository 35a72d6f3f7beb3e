package canonical

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
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
// pointers (a Value is 72 bytes; copying one per node costs more than
// writing most scalars).
type khEncoder struct {
	// ents is a stack of member orders: each object being written pushes
	// its members in khoralabs order and pops them when done.
	ents []khEnt
	idx  []int32 // scratch for the general key order
	ko   keyOrderer
	// slot and grp are bucketOrder's scratch: the member in each bucket,
	// and the members of the buckets that hold more than one.
	slot [128]int32
	grp  []khEnt
	// stop, when set, is asked about the key of every single-member object
	// (see AppendKhoralabsUntil).
	stop func(key string) bool
}

// khEnt is one member of an object being ordered: its sort key and its
// index in the object.
type khEnt struct {
	// key is the value of an array-index key, or else nameBit plus the
	// primary ranks of the key's first eight bytes (collate.PrimaryPrefix,
	// whose ranks are all below 0x80), so that one integer comparison
	// puts index keys first, in numeric order.
	key   uint64
	x     int32
	exact bool // key decides (an index, or an exact prefix)
}

// nameBit marks the sort key of a member whose key is not an array index.
const nameBit = 1 << 63

// errStopped unwinds AppendKhoralabsUntil's walk.
var errStopped = errors.New("stopped")

// keyOrderer holds the scratch space of khKeyOrder.
type keyOrderer struct {
	sorter collate.Sorter
	keys   []string
}

var khPool = sync.Pool{New: func() any { return &khEncoder{ents: make([]khEnt, 0, 64)} }}

// AppendCanonical appends the khoralabs canonical form of v to dst.
func (khoralabs) AppendCanonical(dst []byte, v Value) ([]byte, error) {
	out, _, err := appendKhoralabs(dst, &v, nil)
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
	return appendKhoralabs(dst, v, stop)
}

func appendKhoralabs(dst []byte, v *Value, stop func(string) bool) ([]byte, bool, error) {
	e := khPool.Get().(*khEncoder)
	out, stopped, err := e.appendUntil(dst, v, stop)
	if e.small() {
		khPool.Put(e)
	}
	return out, stopped, err
}

// KhoralabsEncoder writes khoralabs canonical forms (see Khoralabs) and
// keeps its scratch space from one call to the next, for callers that
// encode many documents and keep their own pooled state. The zero value is
// ready to use; an encoder must not be used by two goroutines at once.
type KhoralabsEncoder struct{ e khEncoder }

// AppendUntil is AppendKhoralabsUntil with this encoder's scratch space.
// Like every append function of this package it stores nothing in dst's
// spare capacity past what it appends.
func (k *KhoralabsEncoder) AppendUntil(dst []byte, v *Value, stop func(key string) bool) (out []byte, stopped bool, err error) {
	out, stopped, err = k.e.appendUntil(dst, v, stop)
	if !k.e.small() {
		k.e = khEncoder{} // do not keep a huge document's scratch space
	}
	return out, stopped, err
}

func (e *khEncoder) appendUntil(dst []byte, v *Value, stop func(string) bool) ([]byte, bool, error) {
	e.stop = stop
	dst, err := e.value(dst, v, 0)
	stopped := false
	if err != nil {
		if err == errStopped {
			stopped, err = true, nil
		} else if _, ok := err.(*pathError); !ok {
			err = &pathError{profile: "khoralabs", err: err}
		}
	}
	e.stop = nil
	e.ents, e.idx = e.ents[:0], e.idx[:0]
	return dst, stopped, err
}

// small reports whether e's scratch space is small enough to keep.
func (e *khEncoder) small() bool {
	return cap(e.ents) <= 1<<16 && cap(e.idx) <= 1<<16 && cap(e.ko.keys) <= 1<<16
}

// keyError is the error of a member whose key cannot be written (kept
// out of the object writer, whose frame it would grow).
func keyError(key string, err error) error {
	return khAt(fmt.Errorf("key: %w", err), keyStep(key))
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
		if out, ok := appendPlainJSString(b, v.Str); ok {
			return out, nil
		}
		return appendJSStringSlow(b, v.Str)
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
			x := &v.Arr[i]
			var err error
			switch x.Kind {
			case String:
				// Strings and objects, the commonest elements, without a
				// call to value.
				var ok bool
				if b, ok = appendPlainJSString(b, x.Str); ok {
					continue
				}
				b, err = appendJSStringSlow(b, x.Str)
			case Object:
				if depth+1 >= maxEncodeDepth {
					err = errEncodeTooDeep
					break
				}
				b, err = e.object(b, x.Obj, depth+1)
			default:
				b, err = e.value(b, x, depth+1)
			}
			if err != nil {
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

func (e *khEncoder) object(b []byte, obj []Member, depth int) ([]byte, error) {
	n := len(obj)
	if n == 0 {
		return append(b, '{', '}'), nil
	}
	if n == 1 && e.stop != nil && e.stop(obj[0].Key) {
		return b, errStopped
	}
	base := len(e.ents)
	var small [maxSmallOrder]uint16
	var ents []khEnt
	done, err := smallOrder(obj, &small)
	if !done {
		ents, err = e.pushOrder(obj)
	}
	if err != nil {
		e.ents = e.ents[:base]
		return b, khAt(err, "")
	}
	b = append(b, '{')
	for j := range n {
		// A small object's order is in small, any other's in ents.
		var m *Member
		if ents == nil {
			m = &obj[uint8(small[j&(maxSmallOrder-1)])]
		} else {
			m = &obj[ents[j].x]
		}
		var err error
		if j > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = appendPlainJSString(b, m.Key); !ok {
			if b, err = appendJSStringSlow(b, m.Key); err != nil {
				e.ents = e.ents[:base]
				return b, keyError(m.Key, err)
			}
		}
		b = append(b, ':')
		switch v := &m.Value; v.Kind {
		case String:
			if b, ok = appendPlainJSString(b, v.Str); !ok {
				b, err = appendJSStringSlow(b, v.Str)
			}
		case Number:
			if b, ok = appendPlainNumber(b, v.Str); !ok {
				b, err = appendJSNumberRest(b, v.Str)
			}
		case Object:
			if depth+1 >= maxEncodeDepth {
				err = errEncodeTooDeep
				break
			}
			b, err = e.object(b, v.Obj, depth+1)
		default:
			b, err = e.value(b, v, depth+1)
		}
		if err != nil {
			e.ents = e.ents[:base]
			return b, khAt(err, keyStep(m.Key))
		}
	}
	if ents != nil {
		e.ents = e.ents[:base]
	}
	return append(b, '}'), nil
}

// pushOrder pushes the khoralabs order of obj onto e.ents and returns it;
// the caller pops it. Children push theirs above it, and if that moves
// e.ents the old array keeps this object's order unchanged. (Small
// objects are ordered by smallOrder on the writer's stack instead.)
func (e *khEncoder) pushOrder(obj []Member) ([]khEnt, error) {
	base := len(e.ents)
	if err := e.order(obj); err != nil {
		return nil, err
	}
	return e.ents[base:len(e.ents):len(e.ents)], nil
}

// maxQuickOrder is the largest object order sorts by insertion; larger
// ones take the general path (collate.Sorter), as do objects with more
// than maxInexact keys that are not simple ASCII at the start.
const (
	maxQuickOrder = 32
	maxInexact    = 2
)

// order pushes the members of obj onto e.ents in khoralabs order: the
// array-index keys by value, then the others by collation, stably.
//
// Three paths, cheapest first. When every key starts with a simple ASCII
// character (or is an array index, or empty), bucketOrder orders the keys
// by their first character's rank and compares only those that share one.
// Otherwise each key gets a 64-bit sort key — its value if it is an array
// index, else the primary ranks of its first eight bytes
// (collate.PrimaryPrefix) — and an insertion sort compares those
// integers; only pairs whose prefixes are equal, or not exact (a byte that
// is not simple ASCII among the first eight), ask collate.QuickCompare,
// and only the pairs it cannot decide pay for collate.Compare. Objects
// with many inexact keys, or many members, go to the general path
// (keyOrderer), which computes each sort key at most once.
func (e *khEncoder) order(obj []Member) error {
	n := len(obj)
	base := len(e.ents)
	e.ents = slices.Grow(e.ents, n)[:base+n]
	ents := e.ents[base:]
	if n == 1 {
		ents[0] = khEnt{} // nothing to order; the writer checks the key
		return nil
	}
	if n <= maxBucketOrder {
		if done, err := e.bucketOrder(obj, ents); done {
			return err
		}
	}
	inexact := 0
	if n <= maxQuickOrder {
		for i := range obj {
			ents[i] = prefixEnt(obj, i)
			if !ents[i].exact {
				inexact++
			}
		}
	}
	if n > maxQuickOrder || inexact > maxInexact {
		return e.orderGeneral(obj, ents)
	}
	return sortEnts(obj, ents, inexact == 0)
}

// prefixEnt is the sort entry of member i: its index value, or nameBit
// and the primary prefix of its key.
func prefixEnt(obj []Member, i int) khEnt {
	k := obj[i].Key
	if len(k) > 0 && k[0] <= '9' && k[0] >= '0' {
		if x, ok := ArrayIndex(k); ok {
			return khEnt{key: uint64(x), x: int32(i), exact: true}
		}
	}
	p, exact := collate.PrimaryPrefix(k)
	return khEnt{key: nameBit | p, x: int32(i), exact: exact}
}

// sortEnts sorts entries made by prefixEnt into khoralabs order, stably,
// and reports a duplicate key. allExact says every sort key is exact.
func sortEnts(obj []Member, ents []khEnt, allExact bool) error {
	n := len(ents)
	if allExact {
		// Every sort key decides unless it equals another: sort by the
		// keys, then settle each run of equal keys by the strings.
		eq := false
		for i := 1; i < n; i++ {
			x := ents[i]
			j := i
			for ; j > 0 && ents[j-1].key > x.key; j-- {
				ents[j] = ents[j-1]
			}
			ents[j] = x
			eq = eq || j > 0 && ents[j-1].key == x.key
		}
		if !eq {
			return nil
		}
		ties := false
		for i := 0; i < n; {
			j := i + 1
			for j < n && ents[j].key == ents[i].key {
				j++
			}
			if j-i > 1 {
				ties = insertEnts(obj, ents[i:j]) || ties
			}
			i = j
		}
		if ties {
			return checkDuplicates(obj, ents)
		}
		return nil
	}
	if insertEnts(obj, ents) {
		return checkDuplicates(obj, ents)
	}
	return nil
}

// maxSmallOrder is the largest object smallOrder handles.
const maxSmallOrder = 16

// smallOrder orders a small object whose keys all start with a simple
// ASCII character (array indexes first), as bucketOrder would, with less
// set-up: each member packs its first rank above its index into a uint16
// of order (the writer's stack), an insertion sort orders those in place,
// and only runs of members that share a first rank compare their keys
// (compareKeys; array indexes, all of rank 0, by value). The low bytes of
// order[:len(obj)] are then the member indexes in khoralabs order. done
// is false, with nothing decided, for any other object.
func smallOrder(obj []Member, order *[maxSmallOrder]uint16) (done bool, err error) {
	n := len(obj)
	if n > maxSmallOrder {
		return false, nil
	}
	p := order[:n]
	shared := false
	for i := range p {
		k := obj[i].Key
		if len(k) == 0 {
			return false, nil
		}
		r := uint16(smallRank[k[0]])
		if r == 0 {
			// A digit starts an array index (rank 0: first, ordered by
			// value below) or an ordinary key; anything else is not simple.
			if k[0]-'0' > 9 {
				return false, nil
			}
			if _, ok := ArrayIndex(k); !ok {
				r = uint16(collate.SimpleRank(k[0]))
			}
		}
		x := r<<8 | uint16(i)
		j := i
		for ; j > 0 && p[j-1] > x; j-- {
			p[j] = p[j-1]
		}
		p[j] = x
		// Members of the same first rank are inserted in input order, so
		// an earlier one ends up just before x.
		shared = shared || j > 0 && p[j-1]>>8 == r
	}
	ties := false
	for i := 0; shared && i < n; {
		j := i + 1
		for j < n && p[j]>>8 == p[i]>>8 {
			j++
		}
		// Members i…j-1 share a first rank, in input order: sort them by
		// their keys (stably, so collation ties keep input order), or the
		// array indexes (rank 0) by value.
		for t := i + 1; t < j; t++ {
			x := p[t]
			u := t
			for ; u > i; u-- {
				var r int
				if x>>8 == 0 {
					a, _ := ArrayIndex(obj[p[u-1]&0xff].Key)
					c, _ := ArrayIndex(obj[x&0xff].Key)
					r = cmp.Compare(a, c)
				} else {
					r = compareKeys(obj[p[u-1]&0xff].Key, obj[x&0xff].Key)
				}
				if r <= 0 {
					ties = ties || r == 0
					break
				}
				p[u] = p[u-1]
			}
			p[u] = x
		}
		i = j
	}
	if ties {
		var ents [maxSmallOrder]khEnt
		for i, x := range p {
			ents[i] = prefixEnt(obj, int(x&0xff))
		}
		return true, checkDuplicates(obj, ents[:n])
	}
	return true, nil
}

// smallRank is collate.SimpleRank of each byte, but 0 for the digits, with
// which an array-index key could start: smallOrder looks at those keys
// again.
var smallRank = func() (t [256]uint8) {
	for c := range 256 {
		if c < '0' || c > '9' {
			t[c] = collate.SimpleRank(byte(c))
		}
	}
	return t
}()

// compareKeys orders two keys that are not array indexes by collation.
func compareKeys(a, b string) int {
	if r, ok := collate.QuickCompare(a, b); ok {
		return r
	}
	return collate.Compare(a, b)
}

// maxBucketOrder is the largest object bucketOrder handles (its slots are
// int8-free int32s, but its cost is linear only while collisions are few).
const maxBucketOrder = 64

// bucketOrder orders an object whose keys all start with a simple ASCII
// character (or are empty, or are array indexes) without comparing most
// of them: such a key's first primary weight is its first character's, so
// keys whose first characters have different primary ranks are ordered by
// those ranks alone. Each key goes into the bucket of its first rank (a
// bit in a 128-bit set, its index in e.slot); buckets come out in rank
// order, and only keys that share a bucket ("type"/"tags", "a"/"A") are
// sorted by prefixes and strings. done is false, with nothing decided,
// when a key starts with any other character.
func (e *khEncoder) bucketOrder(obj []Member, ents []khEnt) (done bool, err error) {
	var used, shared [2]uint64
	nIdx := 0
	for i := range obj {
		k := obj[i].Key
		var r uint8 // the empty key sorts first, in bucket 0
		if len(k) > 0 {
			c := k[0]
			if c <= '9' && c >= '0' {
				if x, ok := ArrayIndex(k); ok {
					ents[nIdx] = khEnt{key: uint64(x), x: int32(i), exact: true}
					nIdx++
					continue
				}
			}
			if r = collate.SimpleRank(c); r == 0 {
				return false, nil
			}
		}
		w, m := r>>6, uint64(1)<<(r&63)
		if used[w]&m != 0 {
			shared[w] |= m
		} else {
			used[w] |= m
			e.slot[r] = int32(i)
		}
	}
	if nIdx > 1 {
		if err := sortEnts(obj, ents[:nIdx], true); err != nil {
			return true, err
		}
	}
	// Keys in shared buckets: sorted together by prefixes (all of them
	// share a first rank with another, so their order is their bucket's
	// order, then their own).
	grp := e.grp[:0]
	if shared[0]|shared[1] != 0 {
		inexact := false
		for i := range obj {
			k := obj[i].Key
			var r uint8
			if len(k) > 0 {
				if k[0] <= '9' && k[0] >= '0' {
					if _, ok := ArrayIndex(k); ok {
						continue // placed already
					}
				}
				r = collate.SimpleRank(k[0])
			}
			if shared[r>>6]&(1<<(r&63)) != 0 {
				x := prefixEnt(obj, i)
				inexact = inexact || !x.exact
				grp = append(grp, x)
			}
		}
		if err := sortEnts(obj, grp, !inexact); err != nil {
			e.grp = grp
			return true, err
		}
	}
	out, g := nIdx, 0
	for w := range 2 {
		for set := used[w]; set != 0; set &= set - 1 {
			r := w<<6 | bits.TrailingZeros64(set)
			if shared[w]&(1<<(r&63)) == 0 {
				ents[out] = khEnt{x: e.slot[r]}
				out++
				continue
			}
			for ; g < len(grp) && int(grp[g].key>>56&0x7f) == r; g++ {
				ents[out] = grp[g]
				out++
			}
		}
	}
	e.grp = grp
	return true, nil
}

// insertEnts sorts ents stably by compareEnts (insertion sort) and reports
// whether two of them compare equal.
func insertEnts(obj []Member, ents []khEnt) (ties bool) {
	for i := 1; i < len(ents); i++ {
		x := ents[i]
		j := i
		for ; j > 0; j-- {
			r := compareEnts(obj, &x, &ents[j-1])
			if r >= 0 {
				// An element equal to an earlier one meets it or another
				// equal one on its way left.
				ties = ties || r == 0
				break
			}
			ents[j] = ents[j-1]
		}
		ents[j] = x
	}
	return ties
}

// checkDuplicates reports a key that occurs twice in sorted ents. Keys
// that compare equal are adjacent; the same key twice is a duplicate,
// distinct equal keys (a collation tie) are not.
func checkDuplicates(obj []Member, ents []khEnt) error {
	for i := 1; i < len(ents); i++ {
		for j := i - 1; j >= 0 && compareEnts(obj, &ents[j], &ents[i]) == 0; j-- {
			if obj[ents[j].x].Key == obj[ents[i].x].Key {
				return fmt.Errorf("%w %q", ErrDuplicateKey, obj[ents[i].x].Key)
			}
		}
	}
	return nil
}

// compareEnts orders two members in khoralabs order.
func compareEnts(obj []Member, a, b *khEnt) int {
	if (a.key^b.key)&nameBit != 0 || a.key&nameBit == 0 || a.key != b.key && a.exact && b.exact {
		// An index key and a name, two index keys, or two exact prefixes
		// that differ.
		return cmp.Compare(a.key, b.key)
	}
	return compareKeys(obj[a.x].Key, obj[b.x].Key)
}

// orderGeneral orders ents by the general path, from input order.
func (e *khEncoder) orderGeneral(obj []Member, ents []khEnt) error {
	e.idx = e.idx[:0]
	for i := range obj {
		e.idx = append(e.idx, int32(i))
	}
	if err := e.ko.order(obj, e.idx); err != nil {
		return err
	}
	for i, x := range e.idx {
		ents[i] = khEnt{x: x}
	}
	return nil
}

var keyOrderPool = sync.Pool{New: func() any { return new(keyOrderer) }}

// KhoralabsKeyOrder permutes order (indexes into obj, initially in input
// order) into the khoralabs member order: array-index keys ascending by
// value, then the other keys stable-sorted by collation (package collate).
// It reports ErrDuplicateKey if two members share a key.
func KhoralabsKeyOrder(obj []Member, order []int32) error {
	ko := keyOrderPool.Get().(*keyOrderer)
	err := ko.order(obj, order) // which clears its copies of the keys
	keyOrderPool.Put(ko)
	return err
}

func (ko *keyOrderer) order(obj []Member, order []int32) error {
	if len(order) < 2 {
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
	clear(ko.keys) // do not keep documents alive
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

func appendJSNumber(b []byte, lit string) ([]byte, error) {
	if out, ok := appendPlainNumber(b, lit); ok {
		return out, nil
	}
	return appendJSNumberRest(b, lit)
}

// appendJSNumberRest is appendJSNumber for a literal appendPlainNumber
// refused.
func appendJSNumberRest(b []byte, lit string) ([]byte, error) {
	// Fast path: an integer of 1 to 15 digits without leading zeros is an
	// exact double and prints as written ("-0" prints as "0").
	if n := len(lit); n > 0 && n <= 15 {
		i := 0
		if lit[0] == '-' {
			i = 1
		}
		j := i
		for j < n && lit[j]-'0' <= 9 {
			j++
		}
		if j > i && (lit[i] != '0' || j == i+1) {
			if j == n {
				if lit == "-0" {
					return append(b, '0'), nil
				}
				return appendShort(b, lit), nil
			}
			// A plain decimal of at most 15 digits — "12.5", "-0.25" — is
			// written as it is when its last digit is not 0 and, below 1,
			// at most five zeros follow the point (0.000001 is written so,
			// 0.0000001 as 1e-7): see appendShortDecimal.
			if lit[j] == '.' && n-j >= 2 && lit[n-1] != '0' {
				k := j + 1
				for k < n && lit[k]-'0' <= 9 {
					k++
				}
				if k == n && (lit[i] != '0' || !strings.HasPrefix(lit[i+2:], "000000")) {
					return appendShort(b, lit), nil
				}
			}
		}
	}
	if out, ok := appendShortDecimal(b, lit); ok {
		return out, nil
	}
	if !validNumber(lit) {
		return b, fmt.Errorf("%w: %q", ErrInvalidNumber, lit)
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !math.IsInf(f, 0) {
		return b, fmt.Errorf("%w: %q", ErrInvalidNumber, lit)
	}
	return AppendJSNumber(b, f), nil
}

// appendPlainNumber appends a number literal of at most 8 bytes that
// JSON.stringify writes as it is — an integer without leading zeros
// (other than "-0", which it writes as 0), or a plain decimal whose last
// digit is not 0 ("12.5", "-0.25"), see appendJSNumber — without a loop
// over its bytes: the literal is read into one word, and its digits and
// its point are found with word arithmetic. ok is false, with nothing
// written, for any other literal.
func appendPlainNumber(b []byte, lit string) ([]byte, bool) {
	n := len(lit)
	if n == 0 || n > 8 {
		return b, false
	}
	at := len(b)
	if cap(b)-at < 8 {
		b = slices.Grow(b, 8)
	}
	d := (*[8]byte)(b[at : at+8])
	// The literal's bytes, first in the low byte, zeros above (overlapping
	// loads put the same bytes in the same places), and stored back with
	// the same loads' words, so that nothing past the literal is written.
	if n >= 4 {
		lo, hi := load32(lit, 0), load32(lit, n-4)
		if !plainNumber(lo|hi<<(8*(n-4)), n) {
			return b, false
		}
		binary.LittleEndian.PutUint32(d[0:4], uint32(lo))
		binary.LittleEndian.PutUint32(d[n-4:n], uint32(hi))
		return b[:at+n], true
	}
	c0, c1, c2 := lit[0], lit[n>>1], lit[n-1]
	if !plainNumber(uint64(c0)|uint64(c1)<<(8*(n>>1))|uint64(c2)<<(8*(n-1)), n) {
		return b, false
	}
	if n == 2 && c0 == '-' && c1 == '0' { // "-0" is written 0
		d[0] = '0'
		return b[:at+1], true
	}
	d[0], d[n>>1], d[n-1] = c0, c1, c2
	return b[:at+n], true
}

// plainNumber reports whether the literal of n bytes (1 ≤ n ≤ 8) held in
// w, first in the low byte, is written by JSON.stringify as it is (or, for
// "-0", as 0): see appendPlainNumber.
func plainNumber(w uint64, n int) bool {
	m := n // bytes after the sign
	if w&0xff == '-' {
		w >>= 8
		m--
		if m == 0 {
			return false
		}
	}
	// nd flags (high bit) each of the m bytes that is not a digit: its
	// high nibble is not 3, or its low nibble is above 9 (adding 6 carries
	// into the high nibble; a carry out of a byte can only come from a
	// byte that is flagged anyway).
	x := (w&(lsb*0xf0) ^ lsb*0x30) | ((w+lsb*0x06)&(lsb*0xf0) ^ lsb*0x30)
	nd := ((x&(lsb*0x7f) + lsb*0x7f) | x) & msb & (1<<(8*m) - 1)
	first := w & 0xff
	if nd == 0 {
		// An integer: no leading zero, but "-0" (written 0).
		return first != '0' || m == 1
	}
	// A decimal: one non-digit, the point, after the first digit and
	// before the last, which is not 0; "0" is the only integer part that
	// starts with 0. (Below 1 such a decimal has at most five zeros after
	// the point — 8 bytes leave no room for six and a last digit — so its
	// double is written as it is; see appendJSNumber.)
	dot := bits.TrailingZeros64(nd) >> 3
	return nd&(nd-1) == 0 && w>>(8*dot)&0xff == '.' && dot != 0 && dot < m-1 &&
		w>>(8*(m-1))&0xff != '0' && (first != '0' || dot == 1)
}

// appendShortDecimal writes a number literal -?(0|[1-9]d*)(.d+)?([eE][+-]?d{1,4})?
// with at most 15 significant digits and a value of 0 or between 1e-300
// and 1e300 the way Number::toString writes its double, without going
// through float64. Such a literal's significant digits (trailing zeros
// dropped) are the shortest decimal that round-trips its double: a normal
// double keeps any 15 significant digits, so no other decimal of 15 digits
// or fewer reads as the same double. What remains is placing the decimal
// point as ECMAScript does (see appendES): "1.50" → 1.5, "-0.0" → 0,
// "1E+2" → 100, "1e-7" → 1e-7, "12.5e20" → 1.25e+21. ok is false for any
// other literal, which takes the float path.
func appendShortDecimal(b []byte, lit string) ([]byte, bool) {
	i := 0
	neg := i < len(lit) && lit[i] == '-'
	if neg {
		i++
	}
	intStart := i
	for i < len(lit) && lit[i] >= '0' && lit[i] <= '9' {
		i++
	}
	intEnd := i
	if intEnd == intStart || (lit[intStart] == '0' && intEnd > intStart+1) {
		return b, false
	}
	fracStart, fracEnd := i, i
	if i < len(lit) && lit[i] == '.' {
		i++
		fracStart = i
		for i < len(lit) && lit[i] >= '0' && lit[i] <= '9' {
			i++
		}
		fracEnd = i
		if fracEnd == fracStart {
			return b, false
		}
	}
	exp := 0
	if i < len(lit) && (lit[i] == 'e' || lit[i] == 'E') {
		i++
		expNeg := false
		if i < len(lit) && (lit[i] == '+' || lit[i] == '-') {
			expNeg = lit[i] == '-'
			i++
		}
		expStart := i
		for i < len(lit) && lit[i] >= '0' && lit[i] <= '9' && i-expStart < 4 {
			exp = exp*10 + int(lit[i]-'0')
			i++
		}
		if i == expStart {
			return b, false
		}
		if expNeg {
			exp = -exp
		}
	}
	if i != len(lit) {
		return b, false // junk, or an exponent of more than 4 digits
	}
	// The significant digits: the integer and fraction digits without
	// leading and trailing zeros; the value is 0.digits × 10^n.
	var dbuf [15]byte
	digits := dbuf[:0]
	n := intEnd - intStart + exp
	leading := true
	zeros := 0 // zeros seen since the last non-zero digit
	for j := intStart; j < fracEnd; j++ {
		if j == intEnd {
			j = fracStart
			if j == fracEnd {
				break
			}
		}
		c := lit[j]
		if leading {
			if c == '0' {
				n--
				continue
			}
			leading = false
		}
		if c == '0' {
			zeros++
			continue
		}
		if len(digits)+zeros >= len(dbuf) {
			return b, false // more than 15 significant digits
		}
		for ; zeros > 0; zeros-- {
			digits = append(digits, '0')
		}
		digits = append(digits, c)
	}
	if len(digits) == 0 {
		return append(b, '0'), true // ±0
	}
	if n < -300 || n > 300 {
		return b, false // near or beyond the subnormal and overflow ends
	}
	if neg {
		b = append(b, '-')
	}
	return appendESDigits(b, digits, n), true
}

// AppendJSNumber appends f as JSON.stringify writes a number: ECMAScript
// Number::toString for finite values (-0 as 0), null for NaN and ±Infinity.
func AppendJSNumber(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	return appendES(b, f)
}
