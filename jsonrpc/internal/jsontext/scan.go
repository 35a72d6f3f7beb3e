// Package jsontext is the JSON engine's validating scanner: it checks that
// a frame is RFC 8259 JSON and finds where each value starts and ends
// without building a tree, unquotes and writes strings, and interns the
// method names that repeat on a busy server.
package jsontext

import (
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// This file holds a small validating JSON scanner. The server uses it to
// split an incoming frame into the members of a request without building a
// generic tree: it checks that the whole frame is RFC 8259 JSON and records
// where each value starts and ends, so that ids and params reach handlers as
// the exact bytes that were received.

// maxScanDepth bounds nesting so that hostile input cannot exhaust the
// stack; it matches encoding/json's own limit.
const maxScanDepth = 10000

var errDepth = errors.New("exceeded max depth")

// A SyntaxError is malformed JSON at byte Offset.
type SyntaxError struct {
	Msg    string
	Offset int
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%s at byte %d", e.Msg, e.Offset) }

// IsSpace reports whether c is JSON whitespace.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipSpace returns the offset of the first non-space byte at or after i.
func SkipSpace(data []byte, i int) int {
	for i < len(data) && IsSpace(data[i]) {
		i++
	}
	return i
}

// ScanValue validates the value starting exactly at data[i] and returns the
// offset just past it.
func ScanValue(data []byte, i, depth int) (int, error) {
	if i >= len(data) {
		return i, &SyntaxError{"unexpected end of input", i}
	}
	switch c := data[i]; {
	case c == '"':
		return ScanString(data, i)
	case c == '{':
		if depth >= maxScanDepth {
			return i, errDepth
		}
		i = SkipSpace(data, i+1)
		if i < len(data) && data[i] == '}' {
			return i + 1, nil
		}
		for {
			if i >= len(data) || data[i] != '"' {
				return i, &SyntaxError{"expected string for object key", i}
			}
			var err error
			if i, err = ScanString(data, i); err != nil {
				return i, err
			}
			i = SkipSpace(data, i)
			if i >= len(data) || data[i] != ':' {
				return i, &SyntaxError{"expected ':' after object key", i}
			}
			i = SkipSpace(data, i+1)
			if i, err = ScanValue(data, i, depth+1); err != nil {
				return i, err
			}
			i = SkipSpace(data, i)
			if i >= len(data) {
				return i, &SyntaxError{"unexpected end of input in object", i}
			}
			switch data[i] {
			case ',':
				i = SkipSpace(data, i+1)
			case '}':
				return i + 1, nil
			default:
				return i, &SyntaxError{"expected ',' or '}' in object", i}
			}
		}
	case c == '[':
		if depth >= maxScanDepth {
			return i, errDepth
		}
		i = SkipSpace(data, i+1)
		if i < len(data) && data[i] == ']' {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = ScanValue(data, i, depth+1); err != nil {
				return i, err
			}
			i = SkipSpace(data, i)
			if i >= len(data) {
				return i, &SyntaxError{"unexpected end of input in array", i}
			}
			switch data[i] {
			case ',':
				i = SkipSpace(data, i+1)
			case ']':
				return i + 1, nil
			default:
				return i, &SyntaxError{"expected ',' or ']' in array", i}
			}
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(data, i)
	case c == 't':
		return scanLiteral(data, i, "true")
	case c == 'f':
		return scanLiteral(data, i, "false")
	case c == 'n':
		return scanLiteral(data, i, "null")
	default:
		return i, &SyntaxError{fmt.Sprintf("invalid character %q looking for beginning of value", c), i}
	}
}

func scanLiteral(data []byte, i int, lit string) (int, error) {
	if len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit {
		return i + len(lit), nil
	}
	return i, &SyntaxError{"invalid literal", i}
}

func scanNumber(data []byte, i int) (int, error) {
	start := i
	if data[i] == '-' {
		i++
	}
	if i >= len(data) {
		return i, &SyntaxError{"invalid number", start}
	}
	switch {
	case data[i] == '0':
		i++
	case data[i] >= '1' && data[i] <= '9':
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	default:
		return i, &SyntaxError{"invalid number", start}
	}
	if i < len(data) && data[i] == '.' {
		i++
		d := i
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
		if i == d {
			return i, &SyntaxError{"invalid number: no digits after '.'", start}
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		d := i
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
		if i == d {
			return i, &SyntaxError{"invalid number: no digits in exponent", start}
		}
	}
	return i, nil
}

// plainStringByte marks the ASCII bytes that may appear in a JSON string
// as themselves: everything but control characters, '"' and '\\'. Bytes
// from 0x80 up start a multi-byte sequence that must be valid UTF-8.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// ScanString validates the string starting at data[i] == '"' — escapes,
// no control characters, valid UTF-8 — and returns the offset just past
// its closing quote.
func ScanString(data []byte, i int) (int, error) {
	start := i
	i++
	for i < len(data) {
		// Fast path: run over the bytes that need no attention.
		for i < len(data) && plainStringByte[data[i]] {
			i++
		}
		if i >= len(data) {
			break
		}
		c := data[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(data) {
				return i, &SyntaxError{"unexpected end of input in string escape", i}
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(data) {
					return i, &SyntaxError{"truncated \\u escape", i}
				}
				for _, h := range data[i+2 : i+6] {
					if !isHex(h) {
						return i, &SyntaxError{"invalid \\u escape", i}
					}
				}
				i += 6
			default:
				return i, &SyntaxError{fmt.Sprintf("invalid escape \\%c in string", data[i+1]), i}
			}
		case c < 0x20:
			return i, &SyntaxError{"control character in string", i}
		default:
			// RFC 8259 §8.1: JSON text is UTF-8. A string echoed byte for
			// byte (an id) must not carry invalid sequences into a reply.
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n == 1 {
				return i, &SyntaxError{"invalid UTF-8 in string", i}
			}
			i += n
		}
	}
	return i, &SyntaxError{"unterminated string", start}
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func hexVal(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10)
	default:
		return rune(c - 'A' + 10)
	}
}

// Unquote decodes a string token already validated by ScanString (including
// its quotes). Invalid UTF-8 and lone surrogates become U+FFFD, as with
// encoding/json.
func Unquote(tok []byte) string {
	body := tok[1 : len(tok)-1]
	plain := true
	for _, c := range body {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return string(body)
	}
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); {
		c := body[i]
		if c == '\\' {
			switch body[i+1] {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := hexVal(body[i+2])<<12 | hexVal(body[i+3])<<8 | hexVal(body[i+4])<<4 | hexVal(body[i+5])
				i += 6
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if i+6 <= len(body) && body[i] == '\\' && body[i+1] == 'u' {
						r2 = hexVal(body[i+2])<<12 | hexVal(body[i+3])<<8 | hexVal(body[i+4])<<4 | hexVal(body[i+5])
					}
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r = d
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				out = utf8.AppendRune(out, r)
				continue
			default: // '"', '\\', '/'
				out = append(out, body[i+1])
			}
			i += 2
			continue
		}
		if c < utf8.RuneSelf {
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(body[i:])
		out = utf8.AppendRune(out, r)
		i += n
	}
	return string(out)
}

// AppendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD;
// control characters, '"' and '\\' are escaped; nothing else is.
func AppendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += n
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// IsBlank reports whether b holds only JSON whitespace.
func IsBlank(b []byte) bool {
	for _, c := range b {
		if !IsSpace(c) {
			return false
		}
	}
	return true
}
