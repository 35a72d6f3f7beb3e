// Package format is the byte format of the evidence log of package
// logstore: how its frames are encoded and decoded, and nothing about
// files, indexes or damage. Every frame is
//
//	u32 body length | u32 CRC-32C(body) | body
//	evidence body = u64 sequence | u16 len + correlation id | u8 len + event type |
//	                u8 len + content hash | u8 len + prev hash | data
//	result body   = u64 0 | u8 1 | i64 unix µs | u16 len + invocation id | data
//	gap body      = u64 0 | u8 2 | u64 next sequence | i64 unix µs | note
//	block body    = u64 0 | u8 3 | u8 codec | u32 raw length | compressed records
//
// all integers big-endian (format version 1 has no blocks; see block.go
// for versions 2 and 3).
//
// Data flow. Writing: the store encodes each appended record or result
// into its buffer (AppendRecord, AppendResult; Repair writes AppendGap),
// and a commit turns runs of those version 1 frames into block frames
// (Compress, AppendBlock; package packed prepares a block's records for
// S2). Reading: the store's scanner checks a frame's header and
// checksum, then decodes its body (DecodeRecord, DecodeResult, DecodeGap,
// or DecodeBlock and Records for a block's records); a replay reads a
// block by DecodePacked or DecodeZstd and unpacks only the records it
// returns. Decoders take bytes that may be damaged or hostile: they fail
// with an error, never a panic, and allocate no more than the bounds
// here (MaxBody, MaxBlockRaw) allow.
package format

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/capmesh/capmesh/evidence"
)

const (
	// HeaderSize is a frame's header: body length and CRC-32C.
	HeaderSize = 8
	// MaxBody bounds one frame's body (corrupt length fields must not
	// make a reader allocate gigabytes).
	MaxBody = 64 << 20
	// ResultKind tags a result record (sequence 0).
	ResultKind = 1
	// GapKind tags a gap record (sequence 0): written by Repair where
	// damaged records were moved aside, it licenses the jump of the
	// evidence sequence to the record after it.
	GapKind = 2
	// MinEvidenceBody is the smallest evidence body: sequence, the three
	// one-byte and one two-byte length fields.
	MinEvidenceBody = 8 + 2 + 3
	// MinRecord is the smallest record, header included: a bound on how
	// many records a run of damaged bytes can have held.
	MinRecord = HeaderSize + MinEvidenceBody
	// MaxSequence bounds the sequences a log may hold: far beyond any real
	// log, far enough from 2^64 that the next sequence never wraps.
	MaxSequence = 1 << 62
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC-32C of a frame body, as its header holds it.
func Checksum(body []byte) uint32 { return crc32.Checksum(body, castagnoli) }

// Seal fills in the header of the frame rec (header + body).
func Seal(rec []byte) {
	body := rec[HeaderSize:]
	binary.BigEndian.PutUint32(rec, uint32(len(body)))
	binary.BigEndian.PutUint32(rec[4:], Checksum(body))
}

// RecordSize is the encoded size of r, header included.
func RecordSize(r *evidence.Record) int {
	return HeaderSize + 8 + 2 + len(r.CorrelationID) + 3 + len(r.EventType) + len(r.ContentHash) + len(r.PrevHash) + len(r.Data)
}

// AppendRecord appends to dst the frame of the evidence record r, sealed.
// A field too long for its length prefix, or data too large for a frame,
// is an error wrapping evidence.ErrInvalid.
func AppendRecord(dst []byte, r *evidence.Record) ([]byte, error) {
	if len(r.CorrelationID) > 0xffff || len(r.EventType) > 0xff || len(r.ContentHash) > 0xff || len(r.PrevHash) > 0xff {
		return dst, fmt.Errorf("%w: correlation id, event type or hash too long", evidence.ErrInvalid)
	}
	if len(r.Data) > MaxBody-1024 {
		return dst, fmt.Errorf("%w: record of %d bytes is too large", evidence.ErrInvalid, len(r.Data))
	}
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	dst = binary.BigEndian.AppendUint64(dst, r.Sequence)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(r.CorrelationID)))
	dst = append(dst, r.CorrelationID...)
	dst = append(dst, byte(len(r.EventType)))
	dst = append(dst, r.EventType...)
	dst = append(dst, byte(len(r.ContentHash)))
	dst = append(dst, r.ContentHash...)
	dst = append(dst, byte(len(r.PrevHash)))
	dst = append(dst, r.PrevHash...)
	dst = append(dst, r.Data...)
	Seal(dst[start:])
	return dst, nil
}

var errShort = errors.New("record body too short")

// DecodeRecord decodes the evidence body b. The record's Data aliases b.
func DecodeRecord(b []byte) (evidence.Record, error) {
	var r evidence.Record
	if len(b) < 10 {
		return r, errShort
	}
	r.Sequence = binary.BigEndian.Uint64(b)
	n := int(binary.BigEndian.Uint16(b[8:]))
	b = b[10:]
	if len(b) < n {
		return r, errShort
	}
	r.CorrelationID, b = string(b[:n]), b[n:]
	for _, dst := range []*string{&r.EventType, &r.ContentHash, &r.PrevHash} {
		if len(b) < 1 || len(b) < 1+int(b[0]) {
			return r, errShort
		}
		n = int(b[0])
		*dst, b = string(b[1:1+n]), b[1+n:]
	}
	r.Data = b
	return r, nil
}

// IsSpecial reports whether the frame body b is not an evidence record's
// (sequence 0): a result, gap or block, told by the byte after it.
func IsSpecial(b []byte) bool { return len(b) >= 8 && binary.BigEndian.Uint64(b) == 0 }

// AppendResult appends to dst the frame of the result r, sealed. An
// invocation id or data too large is an error wrapping evidence.ErrInvalid.
func AppendResult(dst []byte, r *evidence.Result) ([]byte, error) {
	if len(r.InvocationID) > 0xffff || len(r.Data) > MaxBody-1024 {
		return dst, fmt.Errorf("%w: result too large", evidence.ErrInvalid)
	}
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	dst = binary.BigEndian.AppendUint64(dst, 0)
	dst = append(dst, ResultKind)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.At.UnixMicro()))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(r.InvocationID)))
	dst = append(dst, r.InvocationID...)
	dst = append(dst, r.Data...)
	Seal(dst[start:])
	return dst, nil
}

// DecodeResult decodes the result body b. The result's Data aliases b.
func DecodeResult(b []byte) (evidence.Result, error) {
	var r evidence.Result
	if len(b) < 19 || b[8] != ResultKind {
		return r, errors.New("malformed result record")
	}
	r.At = time.UnixMicro(int64(binary.BigEndian.Uint64(b[9:]))).UTC()
	n := int(binary.BigEndian.Uint16(b[17:]))
	if len(b) < 19+n {
		return r, errShort
	}
	r.InvocationID = string(b[19 : 19+n])
	r.Data = b[19+n:]
	return r, nil
}

// Gap is a decoded gap record.
type Gap struct {
	// Next is the sequence of the next evidence record.
	Next uint64
	// At is when the gap was recorded, in unix µs.
	At int64
	// Note says where the missing records' bytes went.
	Note string
}

// AppendGap appends a gap record: the next evidence record has sequence
// next; note says where the missing records' bytes went.
func AppendGap(dst []byte, next uint64, at time.Time, note string) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	dst = binary.BigEndian.AppendUint64(dst, 0)
	dst = append(dst, GapKind)
	dst = binary.BigEndian.AppendUint64(dst, next)
	dst = binary.BigEndian.AppendUint64(dst, uint64(at.UnixMicro()))
	dst = append(dst, note...)
	Seal(dst[start:])
	return dst
}

// DecodeGap decodes the gap body b; a next sequence of 0 or above
// MaxSequence is an error.
func DecodeGap(b []byte) (Gap, error) {
	if len(b) < 25 || b[8] != GapKind {
		return Gap{}, errors.New("malformed gap record")
	}
	g := Gap{Next: binary.BigEndian.Uint64(b[9:]), At: int64(binary.BigEndian.Uint64(b[17:])), Note: string(b[25:])}
	if g.Next == 0 || g.Next > MaxSequence {
		return Gap{}, fmt.Errorf("gap record to sequence %d", g.Next)
	}
	return g, nil
}
