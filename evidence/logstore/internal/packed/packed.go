// Package packed is the form a block of the evidence log (format version
// 3) holds its records in before S2 compresses them: for each record,
//
//	u32 body length | u32 CRC-32C(body) | uvarint n | n bytes: hexpack(body)
//
// — its version 1 header as it is and its body with the lowercase hex
// halved (evidence/internal/hexpack). Headers and lengths stay outside
// the packed bodies, so a reader finds a record without unpacking the
// ones before it, and unpacks only what it returns. Checksums are the
// caller's to verify: every function here takes bytes that may be
// damaged or hostile and fails with ErrCorrupt, never a panic, and never
// writes more than the raw lengths it is given.
package packed

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/capmesh/capmesh/evidence/internal/hexpack"
)

// header is a record's version 1 header: body length and CRC-32C.
const header = 8

// ErrCorrupt reports packed records that do not unpack to what their
// headers and the block say.
var ErrCorrupt = errors.New("corrupt packed records")

// MaxLen bounds the packed form of n raw bytes of records: a record's
// header and packed length (at most 8+5 bytes) and its body packed (at
// most twice) take at most twice its version 1 encoding.
func MaxLen(n int) int { return 2 * n }

// Append appends to dst the packed form of raw, whole records in their
// version 1 encoding.
func Append(dst, raw []byte) []byte {
	for p := 0; p < len(raw); {
		n := int(binary.BigEndian.Uint32(raw[p:]))
		dst = append(dst, raw[p:p+header]...)
		// Reserve the room of the largest uvarint the packed body's
		// length can take, then move the body back after it.
		at, w := len(dst), uvarintLen(uint64(2*n))
		dst = hexpack.Append(append(dst, make([]byte, w)...), raw[p+header:p+header+n])
		k := len(dst) - at - w
		if m := binary.PutUvarint(dst[at:], uint64(k)); m < w {
			copy(dst[at+m:], dst[at+w:])
			dst = dst[:len(dst)-(w-m)]
		}
		p += header + n
	}
	return dst
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// Walk calls fn (if not nil) for each record of packed, the packed
// records of a block of raw length n, with its raw offset, its version 1
// header and its packed body, stopping at the first error; it fails
// unless the records add up to n raw bytes.
func Walk(packed []byte, n int, fn func(off int, hdr, body []byte) error) error {
	off := 0
	for p := 0; p < len(packed); {
		if len(packed)-p < header+1 {
			return fmt.Errorf("%w: short record", ErrCorrupt)
		}
		bn := int(binary.BigEndian.Uint32(packed[p:]))
		k, w := binary.Uvarint(packed[p+header:])
		if w <= 0 || bn > n || k > uint64(len(packed)-p-header-w) || k > 2*uint64(bn) {
			return fmt.Errorf("%w: a record overruns them", ErrCorrupt)
		}
		if off+header+bn > n {
			return fmt.Errorf("%w: records exceed the raw length %d", ErrCorrupt, n)
		}
		body := p + header + w
		if fn != nil {
			if err := fn(off, packed[p:p+header], packed[body:body+int(k)]); err != nil {
				return err
			}
		}
		off += header + bn
		p = body + int(k)
	}
	if off != n {
		return fmt.Errorf("%w: records of %d raw bytes, the block says %d", ErrCorrupt, off, n)
	}
	return nil
}

// Unpack appends to dst the version 1 encoding of packed, the packed
// records of a block of raw length n.
func Unpack(dst, packed []byte, n int) ([]byte, error) {
	err := Walk(packed, n, func(_ int, hdr, body []byte) error {
		var err error
		dst, err = unpackBody(append(dst, hdr...), body, int(binary.BigEndian.Uint32(hdr)))
		return err
	})
	return dst, err
}

// unpackBody appends to dst the body packed unpacks to, which must be n
// bytes long.
func unpackBody(dst, packed []byte, n int) ([]byte, error) {
	start := len(dst)
	dst, err := hexpack.Unpack(dst, packed, n)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if len(dst)-start != n {
		return nil, fmt.Errorf("%w: a record unpacks to %d bytes, its header says %d", ErrCorrupt, len(dst)-start, n)
	}
	return dst, nil
}

// Record appends to dst the record (header and body) of raw length size
// at raw offset at of packed, unpacked: only that record. The walk to it
// starts at the record at p in packed, raw offset off (0, 0: the first),
// and Record returns where the record after it starts, for the next call.
func Record(dst, packed []byte, p int, off, at int64, size uint32) ([]byte, int, int64, error) {
	for p+header < len(packed) && off <= at {
		bn := binary.BigEndian.Uint32(packed[p:])
		k, w := binary.Uvarint(packed[p+header:])
		body := p + header + w
		if w <= 0 || k > uint64(len(packed)-body) {
			break
		}
		next, nextOff := body+int(k), off+header+int64(bn)
		if off == at {
			if header+bn != size {
				break
			}
			dst, err := unpackBody(append(dst, packed[p:p+header]...), packed[body:next], int(bn))
			return dst, next, nextOff, err
		}
		p, off = next, nextOff
	}
	return dst, p, off, fmt.Errorf("%w: no record of %d bytes at %d", ErrCorrupt, size, at)
}
