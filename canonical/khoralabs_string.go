package canonical

import (
	"encoding/binary"
	"fmt"
	"slices"
	"unicode/utf8"
)

// jsPlain marks the bytes JSON.stringify copies as they are without a
// second look: printable ASCII and DEL, except '"' and '\'. Every other
// byte is a C0 control (escaped) or starts a multi-byte sequence (checked
// for validity and for a WTF-8 lone surrogate, then copied or escaped).
var jsPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = false, false
	return t
}()

// AppendJSString appends s as JSON.stringify writes a string: \" \\ \b \t
// \n \f \r, other C0 controls as lowercase \u00xx, lone surrogates (held
// in WTF-8, see Value) as lowercase \udxxx, and everything else raw —
// DEL, U+2028/U+2029, '<', '>', '&' and all non-ASCII. Invalid UTF-8 is
// ErrInvalidUTF8. The output is the same as Value.AppendJSON's for a
// string.
func AppendJSString(b []byte, s string) ([]byte, error) {
	// Most strings (keys, identifiers, prose) need no escape: check and
	// copy them in one pass over machine words.
	if out, ok := appendPlainJSString(b, s); ok {
		return out, nil
	}
	return appendJSStringSlow(b, s)
}

// appendJSStringSlow is AppendJSString for a string that is not plain
// ASCII. Text in other scripts (valid UTF-8 without a control, '"' or
// '\') is still copied as it is after two word-wise checks: Go's UTF-8
// validation rejects the WTF-8 lone surrogates that need escaping.
func appendJSStringSlow(b []byte, s string) ([]byte, error) {
	if !hasASCIIEscape(s) && utf8.ValidString(s) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"'), nil
	}
	i := 0
	for i < len(s) && jsPlain[s[i]] {
		i++
	}
	return appendJSStringFrom(append(b, '"'), s, i)
}

// hasASCIIEscape reports whether s holds a byte JSON.stringify escapes: a
// control below 0x20, '"' or '\'. Bytes from 0x80 are not flagged.
func hasASCIIEscape(s string) bool {
	i := 0
	for ; len(s)-i >= 8; i += 8 {
		if asciiEscapeMask(load64(s, i)) != 0 {
			return true
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			return true
		}
	}
	return false
}

// asciiEscapeMask flags, in the high bit of each byte, the bytes of w that
// JSON.stringify escapes: below 0x20 or equal to '"' (below 0x21 after XOR
// 0x02), or equal to '\' (a zero after the XOR), with the high bit clear.
// A borrow can flag a byte only above one that is flagged rightly, so the
// mask is non-zero exactly when w holds such a byte.
func asciiEscapeMask(w uint64) uint64 {
	return (((w ^ lsb*0x02) - lsb*0x21) | ((w ^ lsb*'\\') - lsb)) &^ w & msb
}

// appendJSStringFrom writes the rest of AppendJSString from s[i], the
// first byte that is not plain; the opening quote is already in b.
func appendJSStringFrom(b []byte, s string, i int) ([]byte, error) {
	start := 0
	for i < len(s) {
		c := s[i]
		if jsPlain[c] {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			if c == 0xED && i+2 < len(s) && s[i+1] >= 0xA0 && s[i+1] <= 0xBF && s[i+2]&0xC0 == 0x80 {
				// A lone surrogate in WTF-8: JSON.stringify escapes it.
				b = append(b, s[start:i]...)
				b = appendU4(b, rune(s[i]&0x0F)<<12|rune(s[i+1]&0x3F)<<6|rune(s[i+2]&0x3F))
				i += 3
				start = i
				continue
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size <= 1 {
				return b, fmt.Errorf("%w: byte 0x%02x at offset %d of string", ErrInvalidUTF8, c, i)
			}
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		if e := shortEscape[c]; e != 0 {
			b = append(b, '\\', e)
		} else {
			b = appendU4(b, rune(c))
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"'), nil
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// appendPlainJSString appends s as a JSON string if JSON.stringify writes
// it as it is (no byte needs an escape or a check: printable ASCII and DEL
// except '"' and '\'), checking and copying short strings with the same
// word loads. ok is false, with b's contents unchanged, for any other
// string.
func appendPlainJSString(b []byte, s string) (out []byte, ok bool) {
	n := len(s)
	at := len(b)
	if n > 16 {
		if cap(b)-at < n+2 {
			b = slices.Grow(b, n+2)
		}
		i := 0
		for ; n-i > 8; i += 8 {
			if specialMask(load64(s, i)) != 0 {
				return b, false
			}
		}
		if specialMask(load64(s, n-8)) != 0 {
			return b, false
		}
		b = b[:at+n+2]
		b[at] = '"'
		copy(b[at+1:], s)
		b[at+n+1] = '"'
		return b, true
	}
	// Up to 16 bytes: written through a fixed 18-byte window, so that the
	// stores need no bounds checks of their own.
	if cap(b)-at < 18 {
		b = slices.Grow(b, 18)
	}
	d := (*[18]byte)(b[at : at+18])
	switch {
	case n >= 8:
		w1, w2 := load64(s, 0), load64(s, n-8)
		if specialMask(w1)|specialMask(w2) != 0 {
			return b, false
		}
		binary.LittleEndian.PutUint64(d[1:9], w1)
		binary.LittleEndian.PutUint64(d[n-7:n+1], w2)
	case n >= 4:
		w1, w2 := load32(s, 0), load32(s, n-4)
		if specialMask(w1|w2<<32) != 0 {
			return b, false
		}
		binary.LittleEndian.PutUint32(d[1:5], uint32(w1))
		binary.LittleEndian.PutUint32(d[n-3:n+1], uint32(w2))
	case n > 0:
		c0, c1, c2 := s[0], s[n>>1], s[n-1]
		if !jsPlain[c0] || !jsPlain[c1] || !jsPlain[c2] {
			return b, false
		}
		d[1], d[1+n>>1], d[n] = c0, c1, c2
	}
	d[0] = '"'
	d[n+1] = '"'
	return b[:at+n+2], true
}

// appendShort appends s, of at most 16 bytes, with the word loads and
// stores of appendPlainJSString instead of a call to memmove.
func appendShort(b []byte, s string) []byte {
	n := len(s)
	at := len(b)
	if n > 16 {
		return append(b, s...)
	}
	if cap(b)-at < 16 {
		b = slices.Grow(b, 16)
	}
	d := (*[16]byte)(b[at : at+16])
	switch {
	case n >= 8:
		binary.LittleEndian.PutUint64(d[0:8], load64(s, 0))
		binary.LittleEndian.PutUint64(d[n-8:n], load64(s, n-8))
	case n >= 4:
		binary.LittleEndian.PutUint32(d[0:4], uint32(load32(s, 0)))
		binary.LittleEndian.PutUint32(d[n-4:n], uint32(load32(s, n-4)))
	case n > 0:
		d[0], d[n>>1], d[n-1] = s[0], s[n>>1], s[n-1]
	}
	return b[:at+n]
}

func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func load32(s string, i int) uint64 {
	s = s[i : i+4]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
}
