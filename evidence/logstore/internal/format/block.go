package format

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/capmesh/capmesh/evidence/logstore/internal/packed"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Blocks: compression at rest. A commit writes what was appended as
// blocks: runs of whole records, compressed together and framed like a
// record:
//
//	u32 body length | u32 CRC-32C(body) | body
//	block body = u64 0 | u8 3 | u8 codec | u32 raw length | compressed records
//
// The raw length is that of the records' exact version 1 encoding
// (header, CRC-32C, body), the logical space records are indexed in. The
// codec byte says how they are compressed:
//
//	0, 1  format version 2: the version 1 encoding, one zstd frame (1:
//	      with dictionary 1); read, never written
//	3     format version 3: packed records, one S2 block with dictionary 3
//
// Packed records (see package packed) keep each record's version 1 header
// and halve the hex of its body, so a read S2-decodes the block (fast: no
// entropy coding) and then unpacks and checks only the records it
// returns. Records keep their own checksums, and content hashes are over
// the canonical bytes each record unpacks to, byte for byte, so
// verification is the same as for a version 1 log. A block holds records
// up to BlockTarget raw bytes (one record more at most); a record too
// large for a block is written as a plain version 1 frame.

const (
	// BlockKind tags a block frame (sequence 0).
	BlockKind = 3
	// BlockHeader is the block body before the compressed records.
	BlockHeader = 8 + 1 + 1 + 4
	// MaxBlockRaw bounds the raw length of a block (a record whose frame
	// would not fit is written uncompressed): what decoding a block may
	// allocate, whatever its header claims (packed records take at most
	// twice their raw length, see packed.MaxLen).
	MaxBlockRaw = 256 << 10
	// BlockTarget is the raw size at which a block is closed: about one
	// governed invocation (5 events and a result, ~7 KB). A read decodes
	// the whole block holding a record it returns: 8 KiB with the
	// dictionary decodes in ~2.4 µs and stores a governed invocation in
	// ~1,220 bytes; 16 KiB without it in ~3.8 µs and ~1,300 bytes, with
	// it ~5.6 µs and ~1,070; 4 KiB with it ~1.5 µs, but ~1,430 bytes.
	BlockTarget = 8 << 10
	// BlockMin is the raw size from which a block closes after a result
	// (see closeBlock).
	BlockMin = 4 << 10
	// Codecs (the byte after the block kind).
	DictNone = 0 // zstd (version 2)
	DictV1   = 1 // zstd with dictionary 1 (version 2)
	CodecS2  = 3 // S2 of packed records with dictionary 3 (version 3)
)

// dictionaryV1 is raw content zstd starts each version 2 block's history
// from: the records of one safety-gated invocation of a conformance
// fixture. Its bytes are frozen (TestDictionaryFrozen): every block
// written with it needs exactly them.
//
//go:embed dict/events-v1.bin
var dictionaryV1 []byte

// DictionaryV1 returns dictionary 1 (see dictionaryV1), which the caller
// must not modify: what the version 2 writer, kept in tests, needs.
func DictionaryV1() []byte { return dictionaryV1 }

// DictV3 returns the S2 dictionary of version 3 (see dictionaryV3).
func DictV3() *s2.Dict { return dictV3() }

// dictionaryV3 is the S2 dictionary of version 3 (s2.Dict's serialized
// form): dictionaryV1's records packed. Frozen like it
// (TestDictionaryV3Frozen).
//
//go:embed dict/events-v3.s2
var dictionaryV3 []byte

var (
	decoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderDictRaw(DictV1, dictionaryV1),
			zstd.WithDecoderMaxMemory(MaxBlockRaw), zstd.WithDecoderMaxWindow(1<<20), zstd.WithDecodeAllCapLimit(true))
		if err != nil {
			panic(fmt.Sprintf("logstore: zstd decoder: %v", err))
		}
		return d
	})
	dictV3 = sync.OnceValue(func() *s2.Dict {
		d := s2.NewDict(dictionaryV3)
		if d == nil {
			panic("logstore: dict/events-v3.s2 is not an S2 dictionary")
		}
		return d
	})
	// packBufs hold a block's packed records while it is compressed.
	packBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2*BlockTarget); return &b }}
)

// AppendBlock appends to dst a block frame holding raw, a run of whole
// records, in format version 3.
func AppendBlock(dst, raw []byte) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	dst = binary.BigEndian.AppendUint64(dst, 0)
	dst = append(dst, BlockKind, CodecS2)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(raw)))
	pb := packBufs.Get().(*[]byte)
	p := packed.Append((*pb)[:0], raw)
	need := s2.MaxEncodedLen(len(p))
	if cap(dst)-len(dst) < need {
		dst = append(make([]byte, 0, len(dst)+need+len(dst)/4), dst...)
	}
	dst = append(dst, dictV3().Encode(dst[len(dst):len(dst)+need], p)...)
	if cap(p) <= 4*MaxBlockRaw {
		*pb = p[:0]
		packBufs.Put(pb)
	}
	Seal(dst[start:])
	return dst
}

// IsBlock reports whether the frame body b is a block's.
func IsBlock(b []byte) bool { return IsSpecial(b) && len(b) > 8 && b[8] == BlockKind }

// ErrBlock is the error (wrapped) for a block body that does not decode.
var ErrBlock = errors.New("malformed block")

// BlockRawLen checks the header of the block body b and returns its raw
// length.
func BlockRawLen(b []byte) (int, error) {
	if len(b) < BlockHeader || !IsBlock(b) {
		return 0, ErrBlock
	}
	if b[9] != DictNone && b[9] != DictV1 && b[9] != CodecS2 {
		return 0, fmt.Errorf("%w: unknown codec %d", ErrBlock, b[9])
	}
	n := binary.BigEndian.Uint32(b[10:])
	if n < MinRecord || n > MaxBlockRaw {
		return 0, fmt.Errorf("%w: raw length %d", ErrBlock, n)
	}
	return int(n), nil
}

// IsPacked reports whether the block body b (its header checked) holds
// packed records (format version 3).
func IsPacked(b []byte) bool { return b[9] == CodecS2 }

// DecodeBlock returns the raw records of the block body b (its frame's
// checksum already verified), in their version 1 encoding, whatever the
// block's format. It allocates at most the raw length the header claims,
// itself bounded by MaxBlockRaw (and, for packed records, twice that).
func DecodeBlock(b []byte) ([]byte, error) {
	n, err := BlockRawLen(b)
	if err != nil {
		return nil, err
	}
	if !IsPacked(b) {
		return DecodeZstd(nil, b, n)
	}
	p, err := DecodePacked(nil, b, n)
	if err != nil {
		return nil, err
	}
	raw, err := packed.Unpack(make([]byte, 0, n), p, n)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBlock, err)
	}
	return raw, nil
}

// DecodeZstd decodes the version 2 block body b of raw length n into buf
// when it has room.
func DecodeZstd(buf, b []byte, n int) ([]byte, error) {
	if cap(buf) < n {
		buf = make([]byte, 0, n)
	}
	raw, err := decoder().DecodeAll(b[BlockHeader:], buf[:0:n])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBlock, err)
	}
	if len(raw) != n {
		return nil, fmt.Errorf("%w: %d raw bytes, the header says %d", ErrBlock, len(raw), n)
	}
	return raw, nil
}

// DecodePacked S2-decodes the version 3 block body b of raw length n into
// buf when it has room, and checks that its packed records add up to n.
func DecodePacked(buf, b []byte, n int) ([]byte, error) {
	src := b[BlockHeader:]
	m, err := s2.DecodedLen(src)
	if err != nil || m > packed.MaxLen(n) || m < MinRecord {
		return nil, fmt.Errorf("%w: S2 block of %d bytes for %d raw (%v)", ErrBlock, m, n, err)
	}
	if cap(buf) < m {
		buf = make([]byte, 0, m)
	}
	p, err := dictV3().Decode(buf[:m], src)
	if err == nil {
		err = packed.Walk(p, n, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBlock, err)
	}
	return p, nil
}

// Compress appends to dst the records of raw (whole records, as Append
// encodes them) as frames: blocks made by block, closed where closeBlock
// says; a record too large for a block as itself. place is called
// for each frame with its raw offset in raw, raw length, and offset and
// length in dst.
func Compress(dst, raw []byte, block func(dst, raw []byte) []byte, place func(rawOff, rawLen, off, n int, block bool)) []byte {
	flush := func(from, to int) {
		if from == to {
			return
		}
		at := len(dst)
		dst = block(dst, raw[from:to])
		place(from, to-from, at, len(dst)-at, true)
	}
	from := 0
	for p := 0; p < len(raw); {
		n := HeaderSize + int(binary.BigEndian.Uint32(raw[p:]))
		switch {
		case n > MaxBlockRaw:
			flush(from, p)
			at := len(dst)
			dst = append(dst, raw[p:p+n]...)
			place(p, n, at, n, false)
			from = p + n
		case p+n-from > MaxBlockRaw:
			flush(from, p)
			from = p
		}
		p += n
		if closeBlock(raw, p, from, p-n) {
			flush(from, p)
			from = p
		}
	}
	flush(from, len(raw))
	return dst
}

// closeBlock says whether a block of raw started at from closes at p,
// the end of the record at q: once it holds BlockTarget, or BlockMin if
// that record is a result — an invocation records its result after its
// events, so its records tend to share a block, which a replay of them
// decodes alone.
func closeBlock(raw []byte, p, from, q int) bool {
	if p-from >= BlockTarget {
		return true
	}
	rec := raw[q+HeaderSize : p]
	return p-from >= BlockMin && len(rec) > 8 && IsSpecial(rec) && rec[8] == ResultKind
}

// BlockCut is the length of the longest run of whole blocks at the start
// of buf (whole records): where Compress would close its last full block.
func BlockCut(buf []byte) int {
	cut, from, q := 0, 0, 0
	for p := 0; p < len(buf); {
		p += HeaderSize + int(binary.BigEndian.Uint32(buf[p:]))
		if closeBlock(buf, p, from, q) {
			cut, from = p, p
		}
		q = p
	}
	return cut
}

// Records calls fn for each record of raw (a block's contents): its
// offset, and the record (header and body) if the header and checksum
// verify (else why not); it stops when fn returns false.
func Records(raw []byte, fn func(off int, rec []byte, why string) bool) {
	for p := 0; p < len(raw); {
		if len(raw)-p < HeaderSize {
			fn(p, nil, "short record header in block")
			return
		}
		n := int(binary.BigEndian.Uint32(raw[p:]))
		if n > len(raw)-p-HeaderSize {
			fn(p, nil, "record overruns its block")
			return
		}
		rec := raw[p : p+HeaderSize+n]
		why := ""
		if binary.BigEndian.Uint32(rec[4:]) != Checksum(rec[HeaderSize:]) {
			why = "checksum mismatch in block"
		}
		if !fn(p, rec, why) || why != "" {
			return
		}
		p += HeaderSize + n
	}
}
