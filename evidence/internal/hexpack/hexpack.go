// Package hexpack halves the lowercase hex in evidence before it is
// compressed. CHP evidence is canonical JSON in which most of what is not
// structure is lowercase hex: SHA-256 hashes (64 digits) and random ids
// (32). A general-purpose compressor stores each digit in a byte unless it
// entropy-codes its literals; packed, each pair of digits is one byte, so
// a fast compressor without entropy coding (S2) stores them as well as
// zstd does, in a fraction of the time.
//
// The packed form is a byte stream in which
//
//	0x01 uvarint(n) n bytes   stands for the 2n lowercase hex digits of those bytes
//	0x02 b                    stands for the byte b itself
//	any other byte            stands for itself
//
// Append packs every run of at least MinRun lowercase hex digits (its
// longest even-length prefix) and escapes the input's own 0x01 and 0x02
// bytes, so any byte string packs and unpacks to itself. Canonical JSON
// holds no raw bytes below 0x20, so evidence needs no escapes; binary
// headers in front of it may. Unpack checks every code and bounds what it
// writes, so a damaged or hostile stream is an error, never a panic or an
// unbounded allocation.
package hexpack

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
)

const (
	codeRun    = 0x01
	codeEscape = 0x02
)

// MinRun is the shortest run of hex digits Append packs: shorter runs
// (dates, counters, small numbers) gain nothing.
const MinRun = 16

// ErrCorrupt reports a packed stream that does not unpack.
var ErrCorrupt = errors.New("hexpack: corrupt stream")

// class of each byte for Append: 1 for a lowercase hex digit.
var class = func() (t [256]byte) {
	for c := '0'; c <= '9'; c++ {
		t[c] = 1
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = 1
	}
	return t
}()

// nibble is each lowercase hex digit's value.
var nibble = func() (t [256]byte) {
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c-'a') + 10
	}
	return t
}()

// Append appends the packed form of src to dst. The packed form is never
// longer than twice src (every byte escaped) and is shorter whenever src
// holds hex runs and no bytes to escape.
//
// It packs each maximal run of at least MinRun hex digits, without
// looking at most bytes: a run that long covers one of every MinRun
// consecutive positions, so only those positions are tested, and the run
// around a hex digit found there is measured in both directions.
func Append(dst, src []byte) []byte {
	plain := 0 // start of the bytes not yet written
	cs := newCodes(src)
	for seg := 0; seg <= len(src); {
		esc := cs.next(seg) // the segment ends at a byte to escape
		for p := seg + MinRun - 1; p < esc; {
			if class[src[p]] != 1 {
				p += MinRun
				continue
			}
			l, r := p, p+1
			for l > seg && class[src[l-1]] == 1 {
				l--
			}
			for r < esc && class[src[r]] == 1 {
				r++
			}
			if n := (r - l) &^ 1; n >= MinRun {
				dst = appendRun(append(dst, src[plain:l]...), src[l:l+n])
				plain = l + n
			}
			p = r + MinRun // a later run starts past r, which is no digit
		}
		if esc == len(src) {
			break
		}
		dst = append(append(dst, src[plain:esc]...), codeEscape, src[esc])
		plain, seg = esc+1, esc+1
	}
	return append(dst, src[plain:]...)
}

// appendRun appends the code of a run of an even number of hex digits.
func appendRun(dst, digits []byte) []byte {
	dst = append(dst, codeRun)
	dst = binary.AppendUvarint(dst, uint64(len(digits)/2))
	n := len(dst)
	dst = slices.Grow(dst, len(digits)/2)[:n+len(digits)/2]
	out := dst[n:]
	for k := range out {
		out[k] = nibble[digits[2*k]]<<4 | nibble[digits[2*k+1]]
	}
	return dst
}

// Unpack appends what packed stands for to dst, refusing to write more
// than limit bytes: ErrCorrupt for a stream that is not well formed (a
// truncated code, a run shorter than MinRun digits or longer than the
// stream, an escape of a byte that needs none) or one that would exceed
// limit. Its time is linear in packed.
func Unpack(dst, packed []byte, limit int) ([]byte, error) {
	start := len(dst)
	over := func() error {
		return fmt.Errorf("%w: unpacks to more than %d bytes", ErrCorrupt, limit)
	}
	cs := newCodes(packed)
	for i := 0; i < len(packed); {
		j := cs.next(i)
		if len(dst)-start+j-i > limit {
			return nil, over()
		}
		dst = append(dst, packed[i:j]...)
		i = j
		if i == len(packed) {
			break
		}
		switch packed[i] {
		case codeEscape:
			if i+1 == len(packed) || packed[i+1]-1 > 1 {
				return nil, fmt.Errorf("%w: escape at byte %d escapes no code", ErrCorrupt, i)
			}
			if len(dst)-start+1 > limit {
				return nil, over()
			}
			dst = append(dst, packed[i+1])
			i += 2
		case codeRun:
			n, w := binary.Uvarint(packed[i+1:])
			if w <= 0 || n < MinRun/2 || n > uint64(len(packed)-i-1-w) {
				return nil, fmt.Errorf("%w: run at byte %d", ErrCorrupt, i)
			}
			if uint64(len(dst)-start)+2*n > uint64(limit) {
				return nil, over()
			}
			i += 1 + w
			dst = hex.AppendEncode(dst, packed[i:i+int(n)])
			i += int(n)
		}
	}
	return dst, nil
}

// codes finds a stream's code bytes in order. Each code is searched for
// again only once the position has passed its last find, so finding every
// code of a stream reads each byte at most once per code (a vectorised
// search): linear in the stream, however its codes are spread.
type codes struct {
	b        []byte
	run, esc int // the next position of each code, as last found
}

func newCodes(b []byte) codes { return codes{b: b, run: -1, esc: -1} }

// next is the position of the first code byte at or after i, or len(b).
func (c *codes) next(i int) int {
	if c.run < i {
		c.run = find(c.b, i, codeRun)
	}
	if c.esc < i {
		c.esc = find(c.b, i, codeEscape)
	}
	return min(c.run, c.esc)
}

// find is the position of the first x in b at or after i, or len(b).
func find(b []byte, i int, x byte) int {
	if k := bytes.IndexByte(b[i:], x); k >= 0 {
		return i + k
	}
	return len(b)
}
