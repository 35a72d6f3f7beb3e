package logstore

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Compression at rest (format version 2). Commit writes what was appended
// as blocks: runs of whole records, each run in its exact version 1
// encoding (header, CRC-32C, body), compressed together with zstd and
// framed like a record:
//
//	u32 body length | u32 CRC-32C(body) | body
//	block body = u64 0 | u8 3 | u8 dictionary | u32 raw length | zstd frame
//
// Records inside keep their own checksums, and content hashes are over
// the canonical bytes the block gives back unchanged, so verification is
// the same as for a version 1 log. A block holds records up to blockTarget
// raw bytes (one record more at most); a record too large for a block is
// written as a plain version 1 frame.

const (
	// blockKind tags a block frame (sequence 0).
	blockKind = 3
	// blockHeader is the block body before the zstd frame.
	blockHeader = 8 + 1 + 1 + 4
	// dictBelow is the raw size under which a block is compressed with
	// the dictionary: what a commit leaves after its full blocks (a lone
	// invocation, say), which alone compresses to too little. Full
	// blocks (blockTarget) find their own matches, and skip the
	// dictionary's cost (its tables and history are loaded for every
	// block, compressing and decompressing).
	dictBelow = 16 << 10
	// maxBlockRaw bounds the raw length of a block (a record whose frame
	// would not fit is written uncompressed): what decoding a block may
	// allocate, whatever its header claims.
	maxBlockRaw = 256 << 10
	// blockTarget is the raw size at which a block is closed: about two
	// governed invocations. A full block is compressed without the
	// dictionary: loading it (a 256 KiB table copy per block) was a
	// quarter of compression's CPU, and a 16 KiB block without it
	// compresses as well as an 8 KiB block with it, costs 40 % less CPU
	// per byte to compress, and decodes in the same time as one 8 KiB
	// block with it. 32 KiB cut compression by a further quarter but
	// made each block's decompression 40 % slower (a replay decompresses
	// every block holding one of its records).
	blockTarget = 16 << 10
	// dictNone and dictV1 name the dictionary a block is compressed with.
	dictNone = 0
	dictV1   = 1
)

// dictionaryV1 is raw content zstd starts each block's history from: the
// records of one safety-gated invocation of a conformance fixture.
// Its bytes are frozen (TestDictionaryFrozen): every block written with it
// needs exactly them.
//
//go:embed dict/events-v1.bin
var dictionaryV1 []byte

var (
	encoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false))
		if err != nil {
			panic(fmt.Sprintf("logstore: zstd encoder: %v", err))
		}
		return e
	})
	dictEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false),
			zstd.WithEncoderDictRaw(dictV1, dictionaryV1))
		if err != nil {
			panic(fmt.Sprintf("logstore: zstd encoder: %v", err))
		}
		return e
	})
	decoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderDictRaw(dictV1, dictionaryV1),
			zstd.WithDecoderMaxMemory(maxBlockRaw), zstd.WithDecoderMaxWindow(1<<20), zstd.WithDecodeAllCapLimit(true))
		if err != nil {
			panic(fmt.Sprintf("logstore: zstd decoder: %v", err))
		}
		return d
	})
)

// appendBlock appends to dst a block frame holding raw, a run of whole
// records.
func appendBlock(dst, raw []byte) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, headerSize)...)
	dst = binary.BigEndian.AppendUint64(dst, 0)
	enc, dict := encoder(), byte(dictNone)
	if len(raw) < dictBelow {
		enc, dict = dictEncoder(), dictV1
	}
	dst = append(dst, blockKind, dict)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(raw)))
	dst = enc.EncodeAll(raw, dst)
	seal(dst[start:])
	return dst
}

// isBlock reports whether the frame body b is a block's.
func isBlock(b []byte) bool { return isResult(b) && len(b) > 8 && b[8] == blockKind }

var errBlock = errors.New("malformed block")

// decodeBlock returns the raw records of the block body b (its frame's
// checksum already verified). It allocates at most the raw length the
// header claims, itself bounded by maxBlockRaw.
func decodeBlock(b []byte) ([]byte, error) { return decodeBlockInto(nil, b) }

// decodeBlockInto is decodeBlock decoding into buf when it has room.
func decodeBlockInto(buf, b []byte) ([]byte, error) {
	if len(b) < blockHeader || !isBlock(b) {
		return nil, errBlock
	}
	if b[9] != dictV1 && b[9] != dictNone {
		return nil, fmt.Errorf("%w: unknown dictionary %d", errBlock, b[9])
	}
	n := binary.BigEndian.Uint32(b[10:])
	if n < minRecord || n > maxBlockRaw {
		return nil, fmt.Errorf("%w: raw length %d", errBlock, n)
	}
	if uint32(cap(buf)) < n {
		buf = make([]byte, 0, n)
	}
	raw, err := decoder().DecodeAll(b[blockHeader:], buf[:0:n])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBlock, err)
	}
	if len(raw) != int(n) {
		return nil, fmt.Errorf("%w: %d raw bytes, the header says %d", errBlock, len(raw), n)
	}
	return raw, nil
}

// compress appends to dst the records of raw (whole records, as Append
// encodes them) as frames: blocks of up to about blockTarget raw bytes, a
// record too large for a block as itself. place is called for each frame
// with its raw offset in raw, raw length, and offset and length in dst.
func compress(dst, raw []byte, place func(rawOff, rawLen, off, n int, block bool)) []byte {
	flush := func(from, to int) {
		if from == to {
			return
		}
		at := len(dst)
		dst = appendBlock(dst, raw[from:to])
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
		if p-from >= blockTarget {
			flush(from, p)
			from = p
		}
	}
	flush(from, len(raw))
	return dst
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
