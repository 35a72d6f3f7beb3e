package canonical

import (
	"fmt"
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
	// Most strings (keys, identifiers, prose) need no escape: find out with
	// one table scan and copy them whole.
	i := 0
	for ; len(s)-i >= 8; i += 8 {
		// Eight bytes at a time: any byte below 0x20, '"', '\\' or
		// non-ASCII sets a high bit (a borrow can also flag a plain byte
		// just above a special one; the byte loop below sorts that out).
		t := s[i : i+8]
		w := uint64(t[0]) | uint64(t[1])<<8 | uint64(t[2])<<16 | uint64(t[3])<<24 |
			uint64(t[4])<<32 | uint64(t[5])<<40 | uint64(t[6])<<48 | uint64(t[7])<<56
		if ((w-lsb*0x20)|(w^(lsb*'"')-lsb)|(w^(lsb*'\\')-lsb)|w)&msb != 0 {
			break
		}
	}
	for i < len(s) && jsPlain[s[i]] {
		i++
	}
	b = append(b, '"')
	if i == len(s) {
		b = append(b, s...)
		return append(b, '"'), nil
	}
	return appendJSStringFrom(b, s, i)
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
