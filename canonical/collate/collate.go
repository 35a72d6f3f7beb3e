// Package collate orders strings exactly as Node.js v20's
// String.prototype.localeCompare does with no arguments on a host whose
// default locale has no collation tailoring (en-US or the root locale): the
// Unicode Collation Algorithm with ICU 78.2's CLDR 48 root collation,
// Unicode 17, at tertiary strength, alternate "non-ignorable", no case-first
// ordering, numeric off, canonical-equivalence normalization on and no
// identical level. This is the comparator of the khoralabs canonical JSON
// profile and of every sort in capability fingerprints.
//
// How a comparison flows: the two strings (UTF-8, or WTF-8 carrying lone
// UTF-16 surrogates) are decoded to code points, brought to NFD (Hangul
// syllables kept whole), and mapped to ICU collation elements through ICU's
// own root data, which internal/gen extracts from the Node binary; the
// elements are then compared level by level (primary, secondary, tertiary)
// the way ICU's CollationCompare does. Strings of printable ASCII take a
// table-driven path that allocates nothing.
//
// Sorting many strings should not pay for a full comparison per pair:
// AppendKey turns a string into a sort key whose byte order is Compare's
// order, and a Sorter sorts stably by trying, per pair, the table-driven
// path first and computing each string's key at most once when that path
// cannot decide (non-ASCII keys are cached across calls). QuickCompare
// exposes the table-driven path to callers with their own loops.
//
// Distinct strings can compare equal (0): canonically equivalent ones, and
// ones that differ only by completely ignorable code points such as most C0
// controls or U+200D. Callers that need a total order must keep ties in
// input order with a stable sort, as V8's Array.prototype.sort does.
//
// golang.org/x/text/collate is not used: its tables are Unicode 6.2 and
// disagree with Node on emoji, recent scripts, U+FFFD, curly quotes,
// non-ASCII digits and CJK extensions.
package collate

//go:generate go run ./internal/gen

import (
	"sync"
	"unicode/utf8"
)

type collator struct {
	d  *icuData
	nf *normData
	// ascii holds the single CE of each ASCII character, 0 for completely
	// ignorable ones; asciiOK is false if any ASCII character needed more
	// than one CE or context, which disables the fast path.
	ascii   [128]uint64
	asciiOK bool
	// prim and ter rank the primary and tertiary weights of the ASCII
	// characters whose single CE has a primary and the common secondary
	// (printable ASCII and TAB..CR); 0 marks every other byte. Two strings
	// of such characters compare by the first differing primary, then by
	// length, then by the first differing tertiary.
	prim, ter [256]uint8
}

var root = sync.OnceValue(func() *collator {
	d, err := loadICUData()
	if err != nil {
		panic(err) // embedded data is verified by the tests
	}
	nf, err := parseNorm(normBin)
	if err != nil {
		panic(err)
	}
	c := &collator{d: d, nf: nf, asciiOK: true}
	for b := range 128 {
		it := ceIter{d: d, nf: nf, text: []rune{rune(b)}}
		ce32 := d.trie.get(rune(b))
		if isSpecialCE32(ce32) && (tagOf(ce32) == contractionTag || tagOf(ce32) == prefixTag) {
			c.asciiOK = false
		}
		it.run()
		switch len(it.ces) {
		case 0:
		case 1:
			c.ascii[b] = it.ces[0]
		default:
			c.asciiOK = false
		}
	}
	c.rankSimpleASCII()
	return c
})

func (c *collator) rankSimpleASCII() {
	if !c.asciiOK {
		return
	}
	var ps, ts []uint32
	for b := range 128 {
		ce := c.ascii[b]
		if ce>>32 != 0 && uint32(ce)>>16 == 0x0500 {
			ps = append(ps, uint32(ce>>32))
			ts = append(ts, uint32(ce)&onlyTertiaryMask)
		}
	}
	rank := func(all []uint32, w uint32) uint8 {
		r := 1
		for _, x := range all {
			if x < w {
				r++
			}
		}
		return uint8(r) // distinct smaller weights + 1; ties share a rank
	}
	ps, ts = dedupe(ps), dedupe(ts)
	for b := range 128 {
		ce := c.ascii[b]
		if ce>>32 != 0 && uint32(ce)>>16 == 0x0500 {
			c.prim[b] = rank(ps, uint32(ce>>32))
			c.ter[b] = rank(ts, uint32(ce)&onlyTertiaryMask)
		}
	}
}

func dedupe(xs []uint32) []uint32 {
	seen := map[uint32]bool{}
	var out []uint32
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// Compare returns -1, 0 or +1 as a sorts before, the same as, or after b in
// Node's default localeCompare order. Strings may carry lone surrogates in
// WTF-8 (ED A0 80 … ED BF BF); invalid UTF-8 bytes compare as U+FFFD.
func Compare(a, b string) int {
	if a == b {
		return 0
	}
	if r, ok := compareSimple(a, b); ok {
		return r
	}
	c := root()
	if c.asciiOK && isASCII(a) && isASCII(b) {
		return c.compareASCII(a, b)
	}
	return c.compareSlow(a, b)
}

// QuickCompare orders a and b when it can do so cheaply: when every byte
// it has to look at is printable ASCII, TAB, LF, VT, FF or CR, which is the
// case for almost every pair of JSON keys, and also when the first primary
// difference comes before any other byte ("région" vs "budget"). ok is
// false otherwise; Compare (or a Sorter) then decides.
func QuickCompare(a, b string) (r int, ok bool) { return compareSimple(a, b) }

// compareSimple compares two strings made only of ASCII characters that
// have a primary weight and the common secondary (simplePrim); ok is false
// for any other input, unless a primary difference comes first. It is the
// path of almost every JSON key.
func compareSimple(a, b string) (r int, ok bool) {
	n := min(len(a), len(b))
	for i := range n {
		pa, pb := simplePrim[a[i]], simplePrim[b[i]]
		if pa == 0 || pb == 0 {
			return 0, false
		}
		if pa != pb {
			if pa < pb {
				return -1, true
			}
			return 1, true
		}
	}
	for i := n; i < len(a); i++ {
		if simplePrim[a[i]] == 0 {
			return 0, false
		}
	}
	for i := n; i < len(b); i++ {
		if simplePrim[b[i]] == 0 {
			return 0, false
		}
	}
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1, true
		}
		return 1, true
	}
	for i := range n {
		if ta, tb := simpleTer[a[i]], simpleTer[b[i]]; ta != tb {
			if ta < tb {
				return -1, true
			}
			return 1, true
		}
	}
	return 0, true
}

// Less reports whether a sorts strictly before b.
func Less(a, b string) bool { return Compare(a, b) < 0 }

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// Level terminators: lower than any real weight of their level.
const (
	endPrimary  = 1
	endWeight16 = 0x0100
)

func (c *collator) compareASCII(a, b string) int {
	// Primary level.
	for i, j := 0, 0; ; {
		pa, pb := uint32(endPrimary), uint32(endPrimary)
		for i < len(a) {
			p := uint32(c.ascii[a[i]] >> 32)
			i++
			if p != 0 {
				pa = p
				break
			}
		}
		for j < len(b) {
			p := uint32(c.ascii[b[j]] >> 32)
			j++
			if p != 0 {
				pb = p
				break
			}
		}
		if pa != pb {
			return cmp32(pa, pb)
		}
		if pa == endPrimary {
			break
		}
	}
	// Secondary level.
	for i, j := 0, 0; ; {
		sa, sb := uint32(endWeight16), uint32(endWeight16)
		for i < len(a) {
			s := uint32(c.ascii[a[i]]) >> 16
			i++
			if s != 0 {
				sa = s
				break
			}
		}
		for j < len(b) {
			s := uint32(c.ascii[b[j]]) >> 16
			j++
			if s != 0 {
				sb = s
				break
			}
		}
		if sa != sb {
			return cmp32(sa, sb)
		}
		if sa == endWeight16 {
			break
		}
	}
	// Tertiary level.
	for i, j := 0, 0; ; {
		ta, tb := uint32(endWeight16), uint32(endWeight16)
		for i < len(a) {
			t := uint32(c.ascii[a[i]]) & onlyTertiaryMask
			i++
			if t != 0 {
				ta = t
				break
			}
		}
		for j < len(b) {
			t := uint32(c.ascii[b[j]]) & onlyTertiaryMask
			j++
			if t != 0 {
				tb = t
				break
			}
		}
		if ta != tb {
			return cmp32(ta, tb)
		}
		if ta == endWeight16 {
			return 0
		}
	}
}

func cmp32(a, b uint32) int {
	if a < b {
		return -1
	}
	return 1
}

// scratch holds the per-comparison buffers, reused through a pool.
type scratch struct {
	runes      []rune
	nfdA, nfdB []rune
	cesA, cesB []uint64
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func (c *collator) compareSlow(a, b string) int {
	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)
	s.cesA, s.nfdA = c.appendCEs(s.cesA[:0], s.nfdA[:0], &s.runes, a)
	s.cesB, s.nfdB = c.appendCEs(s.cesB[:0], s.nfdB[:0], &s.runes, b)
	return compareCEs(s.cesA, s.cesB)
}

// appendCEs appends the collation elements of s to ces, using nfd and
// *runes as scratch space.
func (c *collator) appendCEs(ces []uint64, nfd []rune, runes *[]rune, s string) ([]uint64, []rune) {
	*runes = decodeWTF8((*runes)[:0], s)
	nfd = c.nf.appendNFD(nfd, *runes)
	it := ceIter{d: c.d, nf: c.nf, text: nfd, ces: ces}
	it.run()
	return it.ces, it.text[:0]
}

// CollationElements returns s's ICU collation elements (primary<<32 |
// secondary<<16 | tertiary), for diagnostics and tests.
func CollationElements(s string) []uint64 {
	c := root()
	var runes []rune
	ces, _ := c.appendCEs(nil, nil, &runes, s)
	return ces
}

func compareCEs(a, b []uint64) int {
	for i, j := 0, 0; ; {
		pa, pb := uint32(endPrimary), uint32(endPrimary)
		for i < len(a) {
			p := uint32(a[i] >> 32)
			i++
			if p != 0 {
				pa = p
				break
			}
		}
		for j < len(b) {
			p := uint32(b[j] >> 32)
			j++
			if p != 0 {
				pb = p
				break
			}
		}
		if pa != pb {
			return cmp32(pa, pb)
		}
		if pa == endPrimary {
			break
		}
	}
	for i, j := 0, 0; ; {
		sa, sb := uint32(endWeight16), uint32(endWeight16)
		for i < len(a) {
			s := uint32(a[i]) >> 16
			i++
			if s != 0 {
				sa = s
				break
			}
		}
		for j < len(b) {
			s := uint32(b[j]) >> 16
			j++
			if s != 0 {
				sb = s
				break
			}
		}
		if sa != sb {
			return cmp32(sa, sb)
		}
		if sa == endWeight16 {
			break
		}
	}
	for i, j := 0, 0; ; {
		ta, tb := uint32(endWeight16), uint32(endWeight16)
		for i < len(a) {
			t := uint32(a[i]) & onlyTertiaryMask
			i++
			if t != 0 {
				ta = t
				break
			}
		}
		for j < len(b) {
			t := uint32(b[j]) & onlyTertiaryMask
			j++
			if t != 0 {
				tb = t
				break
			}
		}
		if ta != tb {
			return cmp32(ta, tb)
		}
		if ta == endWeight16 {
			return 0
		}
	}
}

// decodeWTF8 appends the code points of s to dst. A 3-byte encoded
// surrogate (WTF-8) yields that surrogate code point, and an encoded
// lead/trail pair yields the supplementary code point; any other invalid
// byte yields U+FFFD.
func decodeWTF8(dst []rune, s string) []rune {
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			dst = append(dst, rune(b))
			i++
			continue
		}
		if b == 0xed && i+2 < len(s) && s[i+1] >= 0xa0 && s[i+1] <= 0xbf && s[i+2]&0xc0 == 0x80 {
			r := 0xd000 | rune(s[i+1]&0x3f)<<6 | rune(s[i+2]&0x3f)
			i += 3
			if r < 0xdc00 && i+2 < len(s) && s[i] == 0xed && s[i+1] >= 0xb0 && s[i+1] <= 0xbf && s[i+2]&0xc0 == 0x80 {
				t := 0xd000 | rune(s[i+1]&0x3f)<<6 | rune(s[i+2]&0x3f)
				r = 0x10000 + (r-0xd800)<<10 + (t - 0xdc00)
				i += 3
			}
			dst = append(dst, r)
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		dst = append(dst, r)
		i += n
	}
	return dst
}
