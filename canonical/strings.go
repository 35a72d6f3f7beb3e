package canonical

import (
	"fmt"
	"unicode/utf8"
)

// appendWTF8 appends r to b in WTF-8: UTF-8, except that a surrogate code
// point (U+D800..U+DFFF) is written as its 3-byte generalized UTF-8 form
// (ED A0 80..ED BF BF) instead of being replaced.
func appendWTF8(b []byte, r rune) []byte {
	if r >= 0xD800 && r < 0xE000 {
		return append(b, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
	}
	return utf8.AppendRune(b, r)
}

// decodeWTF8 decodes the code point at the start of s, accepting the WTF-8
// form of a lone surrogate. size is 0 for an invalid sequence.
func decodeWTF8(s string) (r rune, size int) {
	if len(s) >= 3 && s[0] == 0xED && s[1] >= 0xA0 && s[1] <= 0xBF && s[2] >= 0x80 && s[2] <= 0xBF {
		return rune(s[0]&0x0F)<<12 | rune(s[1]&0x3F)<<6 | rune(s[2]&0x3F), 3
	}
	r, size = utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && size <= 1 {
		return utf8.RuneError, 0
	}
	return r, size
}

const hexLower = "0123456789abcdef"

func appendU4(b []byte, r rune) []byte {
	return append(b, '\\', 'u', hexLower[r>>12&0xF], hexLower[r>>8&0xF], hexLower[r>>4&0xF], hexLower[r&0xF])
}

// shortEscape maps the bytes that every profile escapes with a two-character
// sequence to that sequence's second character.
var shortEscape = [256]byte{'"': '"', '\\': '\\', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}

// asciiSafe marks the bytes Python's ensure_ascii=True writes as they are:
// printable ASCII (0x20..0x7E) except '"' and '\'.
var asciiSafe = func() (t [256]bool) {
	for c := 0x20; c < 0x7F; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = false, false
	return t
}()

// utf8Safe marks the bytes RFC 8785 writes as they are when they start a run:
// everything except '"', '\', C0 controls and the non-ASCII bytes (which are
// validated, then copied).
var utf8Safe = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = false, false
	return t
}()

// appendASCIIString appends s as a JSON string the way Python's json.dumps
// with ensure_ascii=True does: the short escapes \" \\ \b \f \n \r \t, every
// other code point outside 0x20..0x7E (C0 controls, DEL, all non-ASCII) as
// lowercase \uXXXX, astral code points as a surrogate pair, and lone
// surrogates (WTF-8) as their own \uXXXX.
func appendASCIIString(b []byte, s string) ([]byte, error) {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if asciiSafe[c] {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		if e := shortEscape[c]; e != 0 {
			b = append(b, '\\', e)
			i++
		} else if c < 0x80 {
			b = appendU4(b, rune(c))
			i++
		} else {
			r, size := decodeWTF8(s[i:])
			if size == 0 {
				return b, fmt.Errorf("%w: byte 0x%02x at offset %d of string", ErrInvalidUTF8, c, i)
			}
			if r >= 0x10000 {
				r -= 0x10000
				b = appendU4(b, 0xD800+r>>10)
				b = appendU4(b, 0xDC00+r&0x3FF)
			} else {
				b = appendU4(b, r)
			}
			i += size
		}
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"'), nil
}

// appendUTF8String appends s as a JSON string the way RFC 8785 §3.2.2.2
// does: the short escapes \" \\ \b \f \n \r \t, other C0 controls as
// lowercase \u00xx, everything else (DEL and all non-ASCII) as raw UTF-8.
// A lone surrogate has no UTF-8 form and is an error.
func appendUTF8String(b []byte, s string) ([]byte, error) {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if utf8Safe[c] {
			i++
			continue
		}
		if c >= 0x80 {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size <= 1 {
				if _, n := decodeWTF8(s[i:]); n == 3 {
					return b, fmt.Errorf("%w: lone surrogate at offset %d of string has no UTF-8 form", ErrLoneSurrogate, i)
				}
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

// appendWTF8String appends s as compact JSON that Parse reads back to the
// same string: like appendUTF8String, but a lone surrogate is written as its
// \uXXXX escape. It is the form Value.MarshalJSON writes.
func appendWTF8String(b []byte, s string) ([]byte, error) {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if utf8Safe[c] {
			i++
			continue
		}
		if c >= 0x80 {
			r, size := decodeWTF8(s[i:])
			if size == 0 {
				return b, fmt.Errorf("%w: byte 0x%02x at offset %d of string", ErrInvalidUTF8, c, i)
			}
			if r >= 0xD800 && r < 0xE000 {
				b = append(b, s[start:i]...)
				b = appendU4(b, r)
				start = i + size
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

// compareUTF16 orders two WTF-8 strings by their UTF-16 code units, the key
// order of RFC 8785 §3.2.3 and of JavaScript's default sort. It differs from
// byte (code point) order only when an astral character meets one in
// U+E000..U+FFFF: UTF-16 puts the astral one first, because its leading
// surrogate is below 0xE000.
func compareUTF16(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		switch {
		case len(a) < len(b):
			return -1
		case len(a) > len(b):
			return 1
		}
		return 0
	}
	// Back up to the start of the code point that differs; both strings
	// share the bytes before i, so the start is the same in both.
	for i > 0 && a[i]&0xC0 == 0x80 {
		i--
	}
	ra, _ := decodeWTF8(a[i:])
	rb, _ := decodeWTF8(b[i:])
	ua, ub := firstUnit(ra), firstUnit(rb)
	switch {
	case ua < ub:
		return -1
	case ua > ub:
		return 1
	case ra < rb:
		return -1
	case ra > rb:
		return 1
	}
	// Invalid bytes decode alike; fall back to byte order.
	switch {
	case a[i:] < b[i:]:
		return -1
	case a[i:] > b[i:]:
		return 1
	}
	return 0
}

// firstUnit is the first UTF-16 code unit of r.
func firstUnit(r rune) rune {
	if r >= 0x10000 {
		return 0xD800 + (r-0x10000)>>10
	}
	return r
}
