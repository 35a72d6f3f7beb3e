package collate

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sync"
)

// A sort key turns collation into byte comparison: for any strings a and b,
// bytes.Compare(AppendKey(nil, a), AppendKey(nil, b)) has the sign of
// Compare(a, b). Sorting n strings then costs n key computations (each
// walks its string once) and O(n log n) memcmp calls, instead of O(n log n)
// full collation comparisons that each decode, normalize and map both
// strings again.
//
// Layout (fixed width, so that byte order is exactly compareCEs' level by
// level order):
//
//	primary   weights ≠ 0, 4 bytes big-endian each, then 00 00 00 01
//	secondary weights ≠ 0, 2 bytes big-endian each, then 01 00
//	tertiary  weights ≠ 0 (case bits masked), 2 bytes each, then 01 00
//
// The terminators are the end-of-level values compareCEs uses (endPrimary,
// endWeight16), lower than every real weight of their level, so a string
// whose weights are a prefix of another's sorts first, and the next level
// is only reached when every weight of the previous one is equal. This is
// not ICU's compressed sort key format; the keys are for comparison only.

// AppendKey appends the sort key of s to dst. Strings may carry lone
// surrogates in WTF-8, as for Compare.
func AppendKey(dst []byte, s string) []byte {
	c := root()
	if c.asciiOK && isASCII(s) {
		return c.appendASCIIKey(dst, s)
	}
	if k, ok := keyCache.get(s); ok {
		return append(dst, k...)
	}
	start := len(dst)
	dst = c.appendKeyUncached(dst, s)
	keyCache.put(s, dst[start:])
	return dst
}

// appendKeyUncached computes the sort key of s from the collation data.
func (c *collator) appendKeyUncached(dst []byte, s string) []byte {
	sc := scratchPool.Get().(*scratch)
	sc.cesA, sc.nfdA = c.appendCEs(sc.cesA[:0], sc.nfdA[:0], &sc.runes, s)
	dst = appendCEKey(dst, sc.cesA)
	scratchPool.Put(sc)
	return dst
}

func (c *collator) appendASCIIKey(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if p := uint32(c.ascii[s[i]] >> 32); p != 0 {
			dst = binary.BigEndian.AppendUint32(dst, p)
		}
	}
	dst = append(dst, 0, 0, 0, endPrimary)
	for i := 0; i < len(s); i++ {
		if w := uint16(uint32(c.ascii[s[i]]) >> 16); w != 0 {
			dst = append(dst, byte(w>>8), byte(w))
		}
	}
	dst = append(dst, endWeight16>>8, 0)
	for i := 0; i < len(s); i++ {
		if w := uint16(uint32(c.ascii[s[i]]) & onlyTertiaryMask); w != 0 {
			dst = append(dst, byte(w>>8), byte(w))
		}
	}
	return append(dst, endWeight16>>8, 0)
}

func appendCEKey(dst []byte, ces []uint64) []byte {
	for _, ce := range ces {
		if p := uint32(ce >> 32); p != 0 {
			dst = binary.BigEndian.AppendUint32(dst, p)
		}
	}
	dst = append(dst, 0, 0, 0, endPrimary)
	for _, ce := range ces {
		if w := uint16(uint32(ce) >> 16); w != 0 {
			dst = append(dst, byte(w>>8), byte(w))
		}
	}
	dst = append(dst, endWeight16>>8, 0)
	for _, ce := range ces {
		if w := uint16(uint32(ce) & onlyTertiaryMask); w != 0 {
			dst = append(dst, byte(w>>8), byte(w))
		}
	}
	return append(dst, endWeight16>>8, 0)
}

// keyCache remembers the sort keys of non-ASCII strings: the keys of JSON
// objects and the names in capability payloads repeat from one document to
// the next, and a non-ASCII key costs a decode, an NFD pass and a walk of
// the collation data (~10× an ASCII one). It is bounded: strings longer
// than maxCachedLen are not cached, and once the cached bytes pass
// maxCacheBytes the cache starts over, so hostile input cannot grow it.
var keyCache = &sortKeyCache{m: map[string]string{}}

const (
	maxCachedLen  = 256
	maxCacheBytes = 1 << 20
)

type sortKeyCache struct {
	mu    sync.RWMutex
	m     map[string]string
	bytes int
}

func (c *sortKeyCache) get(s string) (string, bool) {
	if len(s) > maxCachedLen {
		return "", false
	}
	c.mu.RLock()
	k, ok := c.m[s]
	c.mu.RUnlock()
	return k, ok
}

func (c *sortKeyCache) put(s string, key []byte) {
	if len(s) > maxCachedLen {
		return
	}
	c.mu.Lock()
	if c.bytes+len(s)+len(key) > maxCacheBytes {
		clear(c.m)
		c.bytes = 0
	}
	if _, ok := c.m[s]; !ok {
		c.m[s] = string(key)
		c.bytes += len(s) + len(key)
	}
	c.mu.Unlock()
}

// Sorter sorts strings into collation order with a stable sort, reusing its
// buffers between calls. The zero value is ready to use; a Sorter must not
// be used by two goroutines at once.
//
// A list of at most 16 strings is first insertion-sorted with QuickCompare,
// which settles almost every list of JSON keys, identifiers and instruction
// lines. Longer lists, and lists with a pair QuickCompare cannot settle,
// take the cheapest comparison that can decide each pair:
//
//  1. Each string gets a 64-bit prefix: the primary ranks of its first 8
//     bytes when those are printable ASCII, TAB, LF, VT, FF or CR (the
//     "simple" characters: one collation element each, common secondary,
//     no contractions). Two prefixes that differ decide the order with one
//     integer comparison — the first differing primary, or the end of a
//     string that is a primary prefix of the other.
//  2. Otherwise QuickCompare, which also settles pairs whose first primary
//     difference comes before any other character ("région" vs "budget").
//  3. Only the remaining pairs compare sort keys (AppendKey), and each
//     string gets its key computed at most once per Sort (non-ASCII keys
//     come from a shared cache), so sorting n strings never costs more than
//     n key computations, however many comparisons it makes.
type Sorter struct {
	keys []byte
	ents []sortEnt
	span [][2]int32 // key of the element at input position p: keys[span[p][0]:span[p][1]], or [-1,-1]
}

type sortEnt struct {
	prefix uint64 // primary ranks of the first 8 bytes, big-endian, 0-padded
	x      int32  // the element: an index into strs
	p      int32  // its position in the input
	simple bool   // prefix is exact: the first min(8, len) bytes are simple
}

// Sort stably reorders perm, a list of indexes into strs, so that
// strs[perm[0]], strs[perm[1]], … are in collation order; elements whose
// strings compare equal keep their order in perm. ties reports whether any
// two of the strings compare equal (identical strings, or distinct ones
// such as "é" and "e\u0301"), so that a caller can look for duplicates
// only when there can be some.
func (s *Sorter) Sort(perm []int32, strs []string) (ties bool) {
	if len(perm) < 2 {
		return false
	}
	if ties, ok := quickSort(perm, strs); ok {
		return ties
	}
	s.ents = s.ents[:0]
	s.span = s.span[:0]
	s.keys = s.keys[:0]
	for i, x := range perm {
		e := sortEnt{x: x, p: int32(i)}
		e.prefix, e.simple = prefix(strs[x])
		s.ents = append(s.ents, e)
		s.span = append(s.span, [2]int32{-1, -1})
	}
	ents := s.ents
	if len(ents) <= 16 {
		// Insertion sort. An element equal to an earlier one always meets
		// it or another equal element on its way left, so ties are seen.
		for i := 1; i < len(ents); i++ {
			e := ents[i]
			j := i
			for ; j > 0; j-- {
				r := s.compare(&e, &ents[j-1], strs)
				if r >= 0 {
					ties = ties || r == 0
					break
				}
				ents[j] = ents[j-1]
			}
			ents[j] = e
		}
	} else {
		slices.SortStableFunc(ents, func(a, b sortEnt) int { return s.compare(&a, &b, strs) })
		// In sorted order, equal strings have only equal strings between
		// them, so a tie shows as an equal neighbour.
		for i := 1; i < len(ents) && !ties; i++ {
			ties = s.compare(&ents[i-1], &ents[i], strs) == 0
		}
	}
	for i, e := range ents {
		perm[i] = e.x
	}
	return ties
}

// quickSort sorts a short perm by insertion sort with QuickCompare, the
// path of almost every list of keys, identifiers and instruction lines.
// ok is false when perm is long or a pair needs the full collation; perm is
// then partly sorted, in an order from which a stable sort gives the same
// result as from the input.
func quickSort(perm []int32, strs []string) (ties, ok bool) {
	const max = 16
	if len(perm) > max {
		return false, false
	}
	for i := 1; i < len(perm); i++ {
		x := perm[i]
		sx := strs[x]
		j := i
		for ; j > 0; j-- {
			r, ok := compareSimple(sx, strs[perm[j-1]])
			if !ok {
				// Put x back where it was. The prefix is now stably
				// sorted and the rest still in input order, so equal
				// elements keep their input order and a stable sort from
				// here gives the same result as from the input.
				copy(perm[j:i], perm[j+1:i+1])
				perm[i] = x
				return false, false
			}
			if r >= 0 {
				// An element equal to an earlier one always meets it or
				// another equal element on its way left.
				ties = ties || r == 0
				break
			}
			perm[j] = perm[j-1]
		}
		perm[j] = x
	}
	return ties, true
}

func (s *Sorter) compare(a, b *sortEnt, strs []string) int {
	if a.prefix != b.prefix && a.simple && b.simple {
		if a.prefix < b.prefix {
			return -1
		}
		return 1
	}
	sa, sb := strs[a.x], strs[b.x]
	if r, ok := compareSimple(sa, sb); ok {
		return r
	}
	return bytes.Compare(s.key(a.p, sa), s.key(b.p, sb))
}

// prefix summarizes s for fast sorting: the primary ranks of its first 8
// bytes, packed big-endian and padded with 0 (below every rank), and
// whether all of those bytes are "simple" (printable ASCII, TAB, LF, VT, FF
// or CR: one collation element each, with the common secondary weight and
// no contractions). When ok holds for two strings and their prefixes
// differ, the strings compare as their prefixes do: at the first differing
// byte either both have a simple character, whose primaries differ, or one
// string has ended, so its primary weights are a proper prefix of the
// other's. Equal prefixes (or !ok) decide nothing.
func prefix(s string) (p uint64, ok bool) {
	t := &simplePrim
	if len(s) >= 8 {
		// Unrolled, with constant shifts; a zero rank (a byte that is not
		// simple) shows as a zero byte of p.
		p = uint64(t[s[0]])<<56 | uint64(t[s[1]])<<48 | uint64(t[s[2]])<<40 | uint64(t[s[3]])<<32 |
			uint64(t[s[4]])<<24 | uint64(t[s[5]])<<16 | uint64(t[s[6]])<<8 | uint64(t[s[7]])
		return p, (p-lsb) & ^p & msb == 0
	}
	for i := 0; i < len(s); i++ {
		p = p<<8 | uint64(t[s[i]])
	}
	pad := 8 * uint(8-len(s))
	p <<= pad
	// The padding is 0 by design; only the len(s) leading bytes must be
	// non-zero ranks.
	q := p | (1<<pad - 1)
	if len(s) == 0 {
		q = ^uint64(0)
	}
	return p, (q-lsb) & ^q & msb == 0
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// key returns the sort key of str, the string at input position p,
// computing it on first use.
func (s *Sorter) key(p int32, str string) []byte {
	sp := s.span[p]
	if sp[0] < 0 {
		off := len(s.keys)
		s.keys = AppendKey(s.keys, str)
		sp = [2]int32{int32(off), int32(len(s.keys))}
		s.span[p] = sp
	}
	return s.keys[sp[0]:sp[1]]
}

// Strings sorts ss in place into collation order, stably.
func Strings(ss []string) {
	if len(ss) < 2 {
		return
	}
	st := sorterPool.Get().(*sortState)
	st.perm = st.perm[:0]
	for i := range ss {
		st.perm = append(st.perm, int32(i))
	}
	st.sorter.Sort(st.perm, ss)
	st.tmp = append(st.tmp[:0], ss...)
	for i, x := range st.perm {
		ss[i] = st.tmp[x]
	}
	clear(st.tmp)
	sorterPool.Put(st)
}

type sortState struct {
	sorter Sorter
	perm   []int32
	tmp    []string
}

var sorterPool = sync.Pool{New: func() any { return new(sortState) }}
