package canonical

import "strings"

// Pieces of the chp-stable-v1 form for writers that assemble CHP objects of a
// fixed shape themselves (the evidence sealer in chp/boundary): they write
// the members in sorted order and every string through
// AppendChpStableString, so their output is exactly what ChpStableV1 writes
// for the same object (TestChpStablePieces).

// AppendChpStableString appends s as a chp-stable-v1 JSON string: what
// ChpStableV1 writes for it. Invalid UTF-8, which only a Go string that did
// not come from JSON can hold, is written as U+FFFD, so that the bytes a
// writer hashes and the string any verifier decodes from them agree.
//
// Printable ASCII without '"' or '\' — every id, hash and timestamp a CHP
// host writes — is copied as is after a scan eight bytes at a time: the
// evidence sealer writes dozens of such strings per invocation.
func AppendChpStableString(dst []byte, s string) []byte {
	if isPlainASCII(s) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	out, err := appendASCIIString(dst, s)
	if err != nil {
		out, _ = appendASCIIString(dst, strings.ToValidUTF8(s, "\uFFFD"))
	}
	return out
}

// isPlainASCII reports whether every byte of s is one asciiSafe marks:
// printable ASCII other than '"' and '\'. It reads eight bytes at a time.
func isPlainASCII(s string) bool {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	// zero is non-zero exactly when x has a zero byte.
	zero := func(x uint64) uint64 { return (x - ones) &^ x & highs }
	i := 0
	for ; i+8 <= len(s); i += 8 {
		v := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		bad := v & highs                    // >= 0x80
		bad |= (v - ones*0x20) &^ v & highs // < 0x20 (a borrow only follows a flagged byte)
		bad |= (v + ones) &^ v & highs      // 0x7f (a carry only follows a flagged 0xff)
		bad |= zero(v^(ones*'"')) | zero(v^(ones*'\\'))
		if bad != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if !asciiSafe[s[i]] {
			return false
		}
	}
	return true
}

// CompactChpStable appends src, a chp-stable-v1 text (or a fragment of one
// that starts outside a string), without the spaces of its ", " and ": "
// separators: the compact form CHP evidence is stored in. Strings are copied
// unchanged; outside its strings chp-stable-v1 writes no whitespace but the
// separators' spaces.
func CompactChpStable(dst, src []byte) []byte {
	in := false
	start := 0
	for i := 0; i < len(src); i++ {
		switch c := src[i]; {
		case in:
			if c == '\\' {
				i++ // the escaped character never ends the string
			} else if c == '"' {
				in = false
			}
		case c == '"':
			in = true
		case c == ' ':
			dst = append(dst, src[start:i]...)
			start = i + 1
		}
	}
	return append(dst, src[start:]...)
}
