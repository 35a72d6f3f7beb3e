package collate

// Collation elements (CEs) are ICU's 64-bit form: a 32-bit primary weight in
// the high half, then a 16-bit secondary and a 16-bit tertiary weight (the
// tertiary's top two bits are case bits, which the default settings ignore).
// A CE32 is the 32-bit form stored in the data; "special" CE32s carry a tag
// and point into the other tables.

const (
	specialCE32LowByte = 0xc0
	fallbackTag        = 0
	longPrimaryTag     = 1
	longSecondaryTag   = 2
	latinExpansionTag  = 4
	expansion32Tag     = 5
	expansionTag       = 6
	builderDataTag     = 7
	prefixTag          = 8
	contractionTag     = 9
	digitTag           = 10
	u0000Tag           = 11
	hangulTag          = 12
	leadSurrogateTag   = 13
	offsetTag          = 14
	implicitTag        = 15

	contractSingleCPNoMatch = 0x100
	contractNextCCC         = 0x200
	contractTrailingCCC     = 0x400
	hangulNoSpecialJamo     = 0x100

	commonSecAndTerCE = 0x05000500
	commonSecondaryCE = 0x05000000
	commonTertiaryCE  = 0x0500
	onlyTertiaryMask  = 0x3f3f

	hangulBase   = 0xac00
	hangulEnd    = 0xd7a3
	jamoVCount   = 21
	jamoTCount   = 28
	maxCEsPerCP  = 31
	maxLoopCount = 1000
)

func isSpecialCE32(ce32 uint32) bool { return ce32&0xff >= specialCE32LowByte }
func tagOf(ce32 uint32) int          { return int(ce32 & 0xf) }
func indexOf(ce32 uint32) int        { return int(ce32 >> 13) }
func lengthOf(ce32 uint32) int       { return int(ce32>>8) & 31 }

func ceFromSimpleCE32(ce32 uint32) uint64 {
	return uint64(ce32&0xffff0000)<<32 | uint64(ce32&0xff00)<<16 | uint64(ce32&0xff)<<8
}

func ceFromCE32(ce32 uint32) uint64 {
	t := ce32 & 0xff
	if t < specialCE32LowByte {
		return ceFromSimpleCE32(ce32)
	}
	ce32 -= t
	if t&0xf == longPrimaryTag {
		return uint64(ce32)<<32 | commonSecAndTerCE
	}
	return uint64(ce32)
}

func makeCE(p uint32) uint64 { return uint64(p)<<32 | commonSecAndTerCE }

// incThreeBytePrimaryByOffset adds offset to the third (and, carrying, the
// second) byte of a three-byte primary weight, skipping the byte values the
// sort key format reserves.
func incThreeBytePrimaryByOffset(base uint32, compressible bool, offset int) uint32 {
	offset += int(base>>8&0xff) - 2
	p := uint32(offset%254+2) << 8
	offset /= 254
	if compressible {
		offset += int(base>>16&0xff) - 4
		p |= uint32(offset%251+4) << 16
		offset /= 251
	} else {
		offset += int(base>>16&0xff) - 2
		p |= uint32(offset%254+2) << 16
		offset /= 254
	}
	return p | (base&0xff000000 + uint32(offset)<<24)
}

// unassignedPrimary is the implicit primary weight of a code point that has
// no mapping (unassigned code points, surrogates, noncharacters).
func unassignedPrimary(c rune) uint32 {
	c++
	p := uint32(2 + (c%18)*14)
	c /= 18
	p |= uint32(2+c%254) << 8
	c /= 254
	p |= uint32(4+c%251) << 16
	return p | 0xfe<<24
}

// ceIter turns one NFD (Hangul syllables kept) code point sequence into CEs,
// following ICU's CollationIterator: contractions (with UCA S2.1
// discontiguous matching over unblocked non-starters), prefixes, expansions,
// Hangul, offset and implicit weights.
type ceIter struct {
	d    *icuData
	nf   *normData
	text []rune
	ces  []uint64
}

func (it *ceIter) run() {
	for i := 0; i < len(it.text); {
		i = it.appendAt(i)
	}
}

// appendAt appends the CEs for the code point at i and returns the index of
// the next unprocessed code point.
func (it *ceIter) appendAt(i int) int {
	c := it.text[i]
	if c >= 0xd800 && c <= 0xdfff {
		it.ces = append(it.ces, makeCE(unassignedPrimary(c)))
		return i + 1
	}
	next := i + 1
	ce32 := it.d.trie.get(c)
	for loops := 0; isSpecialCE32(ce32); loops++ {
		if loops > maxLoopCount {
			ce32 = uint32(0xfffd0505) // cannot happen with valid data
			break
		}
		switch tagOf(ce32) {
		case longPrimaryTag:
			it.ces = append(it.ces, uint64(ce32&0xffffff00)<<32|commonSecAndTerCE)
			return next
		case longSecondaryTag:
			it.ces = append(it.ces, uint64(ce32&0xffffff00))
			return next
		case latinExpansionTag:
			it.ces = append(it.ces,
				uint64(ce32&0xff000000)<<32|commonSecondaryCE|uint64(ce32&0xff0000)>>8,
				uint64(ce32&0xff00)<<16|commonTertiaryCE)
			return next
		case expansion32Tag:
			idx, n := indexOf(ce32), lengthOf(ce32)
			for _, x := range it.d.ce32s[idx : idx+n] {
				it.ces = append(it.ces, ceFromCE32(x))
			}
			return next
		case expansionTag:
			idx, n := indexOf(ce32), lengthOf(ce32)
			it.ces = append(it.ces, it.d.ces[idx:idx+n]...)
			return next
		case prefixTag:
			ce32 = it.fromPrefix(ce32, i)
		case contractionTag:
			ce32, next = it.fromContraction(ce32, i)
		case digitTag:
			ce32 = it.d.ce32s[indexOf(ce32)]
		case u0000Tag:
			ce32 = it.d.ce32s[0]
		case hangulTag:
			s := c - hangulBase
			t := s % jamoTCount
			s /= jamoTCount
			v := s % jamoVCount
			l := s / jamoVCount
			it.appendJamo(it.d.jamo[l])
			it.appendJamo(it.d.jamo[19+v])
			if t != 0 {
				it.appendJamo(it.d.jamo[39+t])
			}
			return next
		case offsetTag:
			data := it.d.ces[indexOf(ce32)]
			p := uint32(data >> 32)
			lower := int32(data)
			off := int(c-rune(lower>>8)) * int(lower&0x7f)
			it.ces = append(it.ces, makeCE(incThreeBytePrimaryByOffset(p, lower&0x80 != 0, off)))
			return next
		case implicitTag:
			it.ces = append(it.ces, makeCE(unassignedPrimary(c)))
			return next
		default: // fallback, reserved, builder data, lead surrogate: not in root data
			it.ces = append(it.ces, makeCE(unassignedPrimary(c)))
			return next
		}
	}
	it.ces = append(it.ces, ceFromSimpleCE32(ce32))
	return next
}

// appendJamo appends the CEs of one conjoining Jamo CE32 (root Jamo CE32s
// are simple or expansions, never contextual).
func (it *ceIter) appendJamo(ce32 uint32) {
	if !isSpecialCE32(ce32) {
		it.ces = append(it.ces, ceFromSimpleCE32(ce32))
		return
	}
	switch tagOf(ce32) {
	case expansion32Tag:
		idx, n := indexOf(ce32), lengthOf(ce32)
		for _, x := range it.d.ce32s[idx : idx+n] {
			it.ces = append(it.ces, ceFromCE32(x))
		}
	case expansionTag:
		idx, n := indexOf(ce32), lengthOf(ce32)
		it.ces = append(it.ces, it.d.ces[idx:idx+n]...)
	default:
		it.ces = append(it.ces, ceFromCE32(ce32))
	}
}

func readCE32(u []uint16) uint32 { return uint32(u[0])<<16 | uint32(u[1]) }

// fromPrefix resolves a PREFIX_TAG CE32 by matching the code points before
// position i backwards against the prefix trie.
func (it *ceIter) fromPrefix(ce32 uint32, i int) uint32 {
	p := it.d.contexts[indexOf(ce32):]
	ce32 = readCE32(p)
	tr := newUCharsTrie(p[2:])
	for j := i - 1; j >= 0; j-- {
		r := tr.nextCodePoint(it.text[j])
		if r.hasValue() {
			ce32 = tr.value()
		}
		if !r.hasNext() {
			break
		}
	}
	return ce32
}

// fromContraction resolves a CONTRACTION_TAG CE32 for the code point at i:
// the longest contiguous match, then (UCA S2.1.1–S2.1.3) unblocked
// non-starters that extend it, which are removed from the text. It returns
// the resulting CE32 and the index after the contiguous match.
func (it *ceIter) fromContraction(ce32 uint32, i int) (uint32, int) {
	p := it.d.contexts[indexOf(ce32):]
	best := readCE32(p)
	end := i + 1
	text := it.text
	if end >= len(text) {
		return best, end
	}
	if ce32&contractNextCCC != 0 && it.nf.ccc(text[end]) == 0 {
		return best, end
	}
	tr := newUCharsTrie(p[2:])
	atBest := tr
	for k := i + 1; k < len(text); {
		r := tr.nextCodePoint(text[k])
		if r == trieNoMatch {
			break
		}
		k++
		if r.hasValue() {
			best, end, atBest = tr.value(), k, tr
			if !r.hasNext() {
				break
			}
		}
	}
	if ce32&contractTrailingCCC == 0 || (ce32&contractSingleCPNoMatch != 0 && end == i+1) {
		return best, end
	}
	// Discontiguous: text[end] did not extend the match contiguously.
	if end+1 >= len(text) || it.nf.ccc(text[end]) == 0 || it.nf.ccc(text[end+1]) == 0 {
		return best, end
	}
	prevCC := it.nf.ccc(text[end])
	st := atBest
	var consumed []int
	for k := end + 1; k < len(text); k++ {
		cc := it.nf.ccc(text[k])
		if cc == 0 {
			break
		}
		if prevCC < cc {
			try := st
			if r := try.nextCodePoint(text[k]); r.hasValue() {
				best, st = try.value(), try
				consumed = append(consumed, k)
				if !r.hasNext() {
					break
				}
				continue
			}
		}
		prevCC = cc
	}
	if len(consumed) > 0 {
		// Remove the consumed non-starters; the skipped ones stay and are
		// processed next, after the contraction's CEs.
		out := text[:consumed[0]]
		for n, k := range consumed {
			lim := len(text)
			if n+1 < len(consumed) {
				lim = consumed[n+1]
			}
			out = append(out, text[k+1:lim]...)
		}
		it.text = out
	}
	return best, end
}
