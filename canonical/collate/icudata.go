package collate

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ucadataGz is ICU's root collation data ("coll/ucadata.icu", format
// "UCol" v5) exactly as Node.js v20.20.2 ships it inside its binary (ICU 78.2,
// CLDR 48, Unicode 17), gzip-compressed. It is extracted by
// internal/gen (go generate), never edited by hand. The data is © Unicode,
// Inc. and others, under the Unicode License v3 (see DATA_LICENSE).
//
//go:embed ucadata.icu.gz
var ucadataGz []byte

// Indexes into the int32 index table at the start of the collation data.
const (
	ixIndexesLength   = 0
	ixOptions         = 1
	ixJamoCE32sStart  = 4
	ixTrieOffset      = 7
	ixCEsOffset       = 9
	ixCE32sOffset     = 11
	ixRootElemsOffset = 12
	ixContextsOffset  = 13
	ixTotalSize       = 19
)

// icuData is the decoded root collation data: the code point trie of CE32
// values and the tables special CE32s point into.
type icuData struct {
	trie     utrie2
	ce32s    []uint32
	ces      []uint64
	contexts []uint16
	jamo     []uint32 // 19 L + 21 V + 27 T CE32s
}

// parseICUData decodes a "UCol" data file (with its ICU data header).
func parseICUData(b []byte) (*icuData, error) {
	if len(b) < 32 {
		return nil, errors.New("collate: data too short")
	}
	headerSize := int(binary.LittleEndian.Uint16(b[0:]))
	if b[2] != 0xda || b[3] != 0x27 {
		return nil, errors.New("collate: bad ICU data magic")
	}
	if b[8] != 0 { // isBigEndian
		return nil, errors.New("collate: big-endian data is not supported")
	}
	if string(b[12:16]) != "UCol" || b[16] != 5 {
		return nil, fmt.Errorf("collate: data format %q v%d, want \"UCol\" v5", b[12:16], b[16])
	}
	if headerSize > len(b) {
		return nil, errors.New("collate: truncated header")
	}
	b = b[headerSize:]
	n := int(int32(binary.LittleEndian.Uint32(b)))
	if n <= ixTotalSize || len(b) < 4*n {
		return nil, errors.New("collate: truncated index table")
	}
	ix := make([]int, n)
	for i := range ix {
		ix[i] = int(int32(binary.LittleEndian.Uint32(b[4*i:])))
	}
	if ix[ixTotalSize] > len(b) {
		return nil, errors.New("collate: truncated data")
	}
	part := func(i int) []byte { return b[ix[i]:ix[i+1]] }
	d := &icuData{}
	var err error
	if d.trie, err = parseUTrie2(part(ixTrieOffset)); err != nil {
		return nil, err
	}
	cesB := part(ixCEsOffset)
	d.ces = make([]uint64, len(cesB)/8)
	for i := range d.ces {
		d.ces[i] = binary.LittleEndian.Uint64(cesB[8*i:])
	}
	ce32B := part(ixCE32sOffset)
	d.ce32s = make([]uint32, len(ce32B)/4)
	for i := range d.ce32s {
		d.ce32s[i] = binary.LittleEndian.Uint32(ce32B[4*i:])
	}
	ctxB := part(ixContextsOffset)
	d.contexts = make([]uint16, len(ctxB)/2)
	for i := range d.contexts {
		d.contexts[i] = binary.LittleEndian.Uint16(ctxB[2*i:])
	}
	js := ix[ixJamoCE32sStart]
	if js < 0 || js+67 > len(d.ce32s) {
		return nil, errors.New("collate: bad Jamo CE32 table")
	}
	d.jamo = d.ce32s[js : js+67]
	return d, nil
}

func loadICUData() (*icuData, error) {
	zr, err := gzip.NewReader(bytes.NewReader(ucadataGz))
	if err != nil {
		return nil, fmt.Errorf("collate: %w", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("collate: %w", err)
	}
	return parseICUData(raw)
}

// utrie2 is a read-only ICU UTrie2 with 32-bit values (the format ICU's
// collation data still uses for its code point → CE32 map).
type utrie2 struct {
	index          []uint16
	data           []uint32
	highStart      rune
	highValueIndex int
}

const (
	trie2Shift2         = 5
	trie2Shift1         = 11
	trie2IndexShift     = 2
	trie2DataMask       = 1<<trie2Shift2 - 1
	trie2Index2Mask     = 1<<(trie2Shift1-trie2Shift2) - 1
	trie2LSCPOffset     = 0x10000 >> trie2Shift2                                   // 2048
	trie2Index2BMPLen   = trie2LSCPOffset + 0x400>>trie2Shift2                     // 2080
	trie2Index1Offset   = trie2Index2BMPLen + 0x800>>6                             // 2112
	trie2OmittedBMPIdx1 = 0x10000 >> trie2Shift1                                   // 32
	trie2LeadOffset     = trie2LSCPOffset - 0xd800>>trie2Shift2                    // 320
	trie2SuppIndex1Base = trie2Index1Offset - trie2OmittedBMPIdx1                  // 2080
	trie2Signature      = uint32('T')<<24 | uint32('r')<<16 | uint32('i')<<8 | '2' // "Tri2"
)

func parseUTrie2(b []byte) (utrie2, error) {
	var t utrie2
	if len(b) < 16 || binary.LittleEndian.Uint32(b) != trie2Signature {
		return t, errors.New("collate: bad UTrie2 signature")
	}
	options := binary.LittleEndian.Uint16(b[4:])
	if options&0xf != 1 {
		return t, errors.New("collate: UTrie2 is not 32-bit")
	}
	indexLen := int(binary.LittleEndian.Uint16(b[6:]))
	dataLen := int(binary.LittleEndian.Uint16(b[8:])) << trie2IndexShift
	t.highStart = rune(binary.LittleEndian.Uint16(b[14:])) << trie2Shift1
	t.highValueIndex = dataLen - 4
	if len(b) < 16+2*indexLen+4*dataLen || indexLen < trie2Index1Offset {
		return t, errors.New("collate: truncated UTrie2")
	}
	t.index = make([]uint16, indexLen)
	for i := range t.index {
		t.index[i] = binary.LittleEndian.Uint16(b[16+2*i:])
	}
	off := 16 + 2*indexLen
	t.data = make([]uint32, dataLen)
	for i := range t.data {
		t.data[i] = binary.LittleEndian.Uint32(b[off+4*i:])
	}
	return t, nil
}

// get returns the value for code point c (surrogate code points use the
// code point, not the lead-unit, index).
func (t *utrie2) get(c rune) uint32 {
	var i int
	switch {
	case c < 0:
		return t.data[t.highValueIndex]
	case c < 0xd800:
		i = int(t.index[c>>trie2Shift2])<<trie2IndexShift + int(c&trie2DataMask)
	case c <= 0xffff:
		off := 0
		if c <= 0xdbff {
			off = trie2LeadOffset
		}
		i = int(t.index[off+int(c>>trie2Shift2)])<<trie2IndexShift + int(c&trie2DataMask)
	case c > 0x10ffff || c >= t.highStart:
		return t.data[t.highValueIndex]
	default:
		i1 := int(t.index[trie2SuppIndex1Base+int(c>>trie2Shift1)])
		i2 := int(t.index[i1+int(c>>trie2Shift2)&trie2Index2Mask])
		i = i2<<trie2IndexShift + int(c&trie2DataMask)
	}
	return t.data[i]
}
