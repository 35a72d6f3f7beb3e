package logstore

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/capmesh/capmesh/evidence/logstore/internal/packed"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Compression at rest. Commit writes what was appended as blocks: runs of
// whole records, compressed together and framed like a record:
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
// up to blockTarget raw bytes (one record more at most); a record too
// large for a block is written as a plain version 1 frame.

const (
	// blockKind tags a block frame (sequence 0).
	blockKind = 3
	// blockHeader is the block body before the compressed records.
	blockHeader = 8 + 1 + 1 + 4
	// maxBlockRaw bounds the raw length of a block (a record whose frame
	// would not fit is written uncompressed): what decoding a block may
	// allocate, whatever its header claims (packed records take at most
	// twice their raw length, see packed.MaxLen).
	maxBlockRaw = 256 << 10
	// blockTarget is the raw size at which a block is closed: about one
	// governed invocation (5 events and a result, ~7 KB). A read decodes
	// the whole block holding a record it returns: 8 KiB with the
	// dictionary decodes in ~2.4 µs and stores a governed invocation in
	// ~1,220 bytes; 16 KiB without it in ~3.8 µs and ~1,300 bytes, with
	// it ~5.6 µs and ~1,070; 4 KiB with it ~1.5 µs, but ~1,430 bytes.
	blockTarget = 8 << 10
	// blockMin is the raw size from which a block closes after a result
	// (see closeBlock).
	blockMin = 4 << 10
	// Codecs (the byte after the block kind).
	dictNone = 0 // zstd (version 2)
	dictV1   = 1 // zstd with dictionary 1 (version 2)
	codecS2  = 3 // S2 of packed records with dictionary 3 (version 3)
)

// dictionaryV1 is raw content zstd starts each version 2 block's history
// from: the records of one safety-gated invocation of a conformance
// fixture. Its bytes are frozen (TestDictionaryFrozen): every block
// written with it needs exactly them.
//
//go:embed dict/events-v1.bin
var dictionaryV1 []byte

// dictionaryV3 is the S2 dictionary of version 3 (s2.Dict's serialized
// form): dictionaryV1's records packed. Frozen like it
// (TestDictionaryV3Frozen).
//
//go:embed dict/events-v3.s2
var dictionaryV3 []byte

var (
	decoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderDictRaw(dictV1, dictionaryV1),
			zstd.WithDecoderMaxMemory(maxBlockRaw), zstd.WithDecoderMaxWindow(1<<20), zstd.WithDecodeAllCapLimit(true))
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
	packBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2*blockTarget); return &b }}
)

// appendBlock appends to dst a block frame holding raw, a run of whole
// records, in format version 3.
func appendBlock(dst, raw []byte) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, headerSize)...)
	dst = binary.BigEndian.AppendUint64(dst, 0)
	dst = append(dst, blockKind, codecS2)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(raw)))
	pb := packBufs.Get().(*[]byte)
	p := packed.Append((*pb)[:0], raw)
	need := s2.MaxEncodedLen(len(p))
	if cap(dst)-len(dst) < need {
		dst = append(make([]byte, 0, len(dst)+need+len(dst)/4), dst...)
	}
	dst = append(dst, dictV3().Encode(dst[len(dst):len(dst)+need], p)...)
	if cap(p) <= 4*maxBlockRaw {
		*pb = p[:0]
		packBufs.Put(pb)
	}
	seal(dst[start:])
	return dst
}

// isBlock reports whether the frame body b is a block's.
func isBlock(b []byte) bool { return isResult(b) && len(b) > 8 && b[8] == blockKind }

var errBlock = errors.New("malformed block")

// blockRawLen checks the header of the block body b and returns its raw
// length.
func blockRawLen(b []byte) (int, error) {
	if len(b) < blockHeader || !isBlock(b) {
		return 0, errBlock
	}
	if b[9] != dictNone && b[9] != dictV1 && b[9] != codecS2 {
		return 0, fmt.Errorf("%w: unknown codec %d", errBlock, b[9])
	}
	n := binary.BigEndian.Uint32(b[10:])
	if n < minRecord || n > maxBlockRaw {
		return 0, fmt.Errorf("%w: raw length %d", errBlock, n)
	}
	return int(n), nil
}

// isPacked reports whether the block body b (its header checked) holds
// packed records (format version 3).
func isPacked(b []byte) bool { return b[9] == codecS2 }

// decodeBlock returns the raw records of the block body b (its frame's
// checksum already verified), in their version 1 encoding, whatever the
// block's format. It allocates at most the raw length the header claims,
// itself bounded by maxBlockRaw (and, for packed records, twice that).
func decodeBlock(b []byte) ([]byte, error) {
	n, err := blockRawLen(b)
	if err != nil {
		return nil, err
	}
	if !isPacked(b) {
		return decodeZstd(nil, b, n)
	}
	p, err := decodePacked(nil, b, n)
	if err != nil {
		return nil, err
	}
	raw, err := packed.Unpack(make([]byte, 0, n), p, n)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBlock, err)
	}
	return raw, nil
}

// decodeZstd decodes the version 2 block body b of raw length n into buf
// when it has room.
func decodeZstd(buf, b []byte, n int) ([]byte, error) {
	if cap(buf) < n {
		buf = make([]byte, 0, n)
	}
	raw, err := decoder().DecodeAll(b[blockHeader:], buf[:0:n])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBlock, err)
	}
	if len(raw) != n {
		return nil, fmt.Errorf("%w: %d raw bytes, the header says %d", errBlock, len(raw), n)
	}
	return raw, nil
}

// decodePacked S2-decodes the version 3 block body b of raw length n into
// buf when it has room, and checks that its packed records add up to n.
func decodePacked(buf, b []byte, n int) ([]byte, error) {
	src := b[blockHeader:]
	m, err := s2.DecodedLen(src)
	if err != nil || m > packed.MaxLen(n) || m < minRecord {
		return nil, fmt.Errorf("%w: S2 block of %d bytes for %d raw (%v)", errBlock, m, n, err)
	}
	if cap(buf) < m {
		buf = make([]byte, 0, m)
	}
	p, err := dictV3().Decode(buf[:m], src)
	if err == nil {
		err = packed.Walk(p, n, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBlock, err)
	}
	return p, nil
}

// compress appends to dst the records of raw (whole records, as Append
// encodes them) as frames: blocks made by block, closed where closeBlock
// says; a record too large for a block as itself. place is called
// for each frame with its raw offset in raw, raw length, and offset and
// length in dst.
func compress(dst, raw []byte, block func(dst, raw []byte) []byte, place func(rawOff, rawLen, off, n int, block bool)) []byte {
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
		n := headerSize + int(binary.BigEndian.Uint32(raw[p:]))
		switch {
		case n > maxBlockRaw:
			flush(from, p)
			at := len(dst)
			dst = append(dst, raw[p:p+n]...)
			place(p, n, at, n, false)
			from = p + n
		case p+n-from > maxBlockRaw:
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
// the end of the record at q: once it holds blockTarget, or blockMin if
// that record is a result — an invocation records its result after its
// events, so its records tend to share a block, which a replay of them
// decodes alone.
func closeBlock(raw []byte, p, from, q int) bool {
	if p-from >= blockTarget {
		return true
	}
	rec := raw[q+headerSize : p]
	return p-from >= blockMin && len(rec) > 8 && isResult(rec) && rec[8] == resultKind
}

// records calls fn for each record of raw (a block's contents): its
// offset, and its body if the header and checksum verify (else why not).
func records(raw []byte, fn func(off int, rec []byte, why string) bool) {
	for p := 0; p < len(raw); {
		if len(raw)-p < headerSize {
			fn(p, nil, "short record header in block")
			return
		}
		n := int(binary.BigEndian.Uint32(raw[p:]))
		if n > len(raw)-p-headerSize {
			fn(p, nil, "record overruns its block")
			return
		}
		rec := raw[p : p+headerSize+n]
		why := ""
		if binary.BigEndian.Uint32(rec[4:]) != crc32.Checksum(rec[headerSize:], castagnoli) {
			why = "checksum mismatch in block"
		}
		if !fn(p, rec, why) || why != "" {
			return
		}
		p += headerSize + n
	}
}
