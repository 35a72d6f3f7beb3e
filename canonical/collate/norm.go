package collate

import (
	_ "embed"
	"encoding/binary"
	"errors"
)

// normBin holds the canonical decompositions and the canonical combining
// class order of Unicode 17 as Node.js v20.20.2 (ICU 78.2) applies them in
// String.prototype.normalize("NFD"). internal/gen derives it from Node.
//
// Format: "NFD1", uint32 n, n × (3-byte code point, 1-byte length, length ×
// 3-byte code points of the full decomposition), uint32 m, m × (3-byte code
// point, 1-byte combining class rank). The rank preserves the order of the
// non-zero canonical combining classes, which is all NFD needs; Hangul
// syllables are left out (they are decomposed algorithmically, and the
// collator keeps them whole anyway).
//
//go:embed norm.bin
var normBin []byte

type normData struct {
	bmpCCC  [0x10000]uint8
	suppCCC map[rune]uint8
	// decomp maps a code point to its full canonical decomposition.
	decomp map[rune][]rune
	// mayChange flags BMP code points that have a decomposition or a
	// non-zero combining class, for a fast "already NFD" check.
	mayChange [0x10000 / 64]uint64
}

func parseNorm(b []byte) (*normData, error) {
	if len(b) < 8 || string(b[:4]) != "NFD1" {
		return nil, errors.New("collate: bad norm data")
	}
	nd := &normData{suppCCC: map[rune]uint8{}, decomp: map[rune][]rune{}}
	cp := func(b []byte) rune { return rune(b[0])<<16 | rune(b[1])<<8 | rune(b[2]) }
	b = b[4:]
	n := int(binary.LittleEndian.Uint32(b))
	b = b[4:]
	for range n {
		if len(b) < 4 {
			return nil, errors.New("collate: truncated norm data")
		}
		c, l := cp(b), int(b[3])
		b = b[4:]
		if len(b) < 3*l {
			return nil, errors.New("collate: truncated norm data")
		}
		d := make([]rune, l)
		for i := range d {
			d[i] = cp(b[3*i:])
		}
		b = b[3*l:]
		nd.decomp[c] = d
		nd.flag(c)
	}
	if len(b) < 4 {
		return nil, errors.New("collate: truncated norm data")
	}
	m := int(binary.LittleEndian.Uint32(b))
	b = b[4:]
	if len(b) < 4*m {
		return nil, errors.New("collate: truncated norm data")
	}
	for i := range m {
		c, cc := cp(b[4*i:]), b[4*i+3]
		if c < 0x10000 {
			nd.bmpCCC[c] = cc
		} else {
			nd.suppCCC[c] = cc
		}
		nd.flag(c)
	}
	return nd, nil
}

func (nd *normData) flag(c rune) {
	if c < 0x10000 {
		nd.mayChange[c>>6] |= 1 << (c & 63)
	}
}

// ccc returns the rank of c's canonical combining class (0 for starters).
func (nd *normData) ccc(c rune) uint8 {
	if c < 0x10000 {
		if c < 0x300 {
			return 0
		}
		return nd.bmpCCC[c]
	}
	return nd.suppCCC[c]
}

// appendNFD appends the canonical decomposition of src (Hangul syllables
// kept) to dst and puts combining marks into canonical order.
func (nd *normData) appendNFD(dst []rune, src []rune) []rune {
	start := len(dst)
	for _, c := range src {
		if c < 0xc0 || (c < 0x10000 && nd.mayChange[c>>6]&(1<<(c&63)) == 0) {
			dst = append(dst, c)
			continue
		}
		if d, ok := nd.decomp[c]; ok {
			dst = append(dst, d...)
		} else {
			dst = append(dst, c)
		}
	}
	// Canonical ordering: stable insertion sort of each run of non-starters.
	s := dst[start:]
	for i := 1; i < len(s); i++ {
		cc := nd.ccc(s[i])
		if cc == 0 {
			continue
		}
		j := i
		for j > 0 {
			pc := nd.ccc(s[j-1])
			if pc <= cc || pc == 0 {
				break
			}
			s[j], s[j-1] = s[j-1], s[j]
			j--
		}
	}
	return dst
}
