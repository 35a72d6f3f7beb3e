package chp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// This file renders the chp-stable-v1 canonical form (chp-v0.2.md §2): Python
// json.dumps(sort_keys=True) — separators ", " and ": ", keys sorted by code
// point, every non-ASCII character escaped as lowercase \uXXXX (surrogate
// pairs above the BMP), integers bare. It works on values decoded with
// json.Decoder.UseNumber, so integer literals keep every digit.
//
// Floats: the spec forbids non-integer numbers in hashed content (rule 6). We
// never emit one into evidence; when a foreign value carries one (a caller's
// subject, say) we render it the way Python's float repr does, so a digest we
// compute over it is stable and matches what the reference would compute.
//
// The shared canonical package will own every profile; this encoder covers
// exactly what CHP hashing needs and is pinned by the upstream canon vectors.

// errFloat reports a non-integer number where rule 6 forbids one.
var errFloat = errors.New("chp-stable-v1: non-integer number in hashed content (chp-v0.2.md §2 rule 6)")

// stableCanon appends the chp-stable-v1 form of v. strict rejects floats.
func stableCanon(dst []byte, v any, strict bool) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		if x {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case string:
		return appendASCIIString(dst, x), nil
	case json.Number:
		return appendNumber(dst, string(x), strict)
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case uint64:
		return strconv.AppendUint(dst, x, 10), nil
	case float64:
		if strict {
			return dst, errFloat
		}
		return appendPyFloat(dst, x), nil
	case json.RawMessage:
		if len(x) == 0 {
			return append(dst, "null"...), nil
		}
		val, err := decodeJSON(x)
		if err != nil {
			return dst, err
		}
		return stableCanon(dst, val, strict)
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			var err error
			if dst, err = stableCanon(dst, e, strict); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case []string:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = appendASCIIString(dst, e)
		}
		return append(dst, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // byte order of UTF-8 == code point order
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = appendASCIIString(dst, k)
			dst = append(dst, ": "...)
			var err error
			if dst, err = stableCanon(dst, x[k], strict); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	default:
		return dst, fmt.Errorf("chp-stable-v1: unsupported Go type %T", v)
	}
}

// decodeJSON decodes one JSON value keeping numbers as json.Number and
// rejecting trailing data.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

func appendNumber(dst []byte, lit string, strict bool) ([]byte, error) {
	if !strings.ContainsAny(lit, ".eE") {
		// An integer: Python keeps it exact. "-0" is the integer 0.
		if lit == "-0" {
			return append(dst, '0'), nil
		}
		return append(dst, lit...), nil
	}
	if strict {
		return dst, errFloat
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return dst, fmt.Errorf("chp-stable-v1: bad number %q: %w", lit, err)
	}
	return appendPyFloat(dst, f), nil
}

// appendPyFloat renders f like Python's float repr.
func appendPyFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	}
	// Shortest round-trip digits, then Python's layout: fixed notation when
	// the decimal exponent is in [-4, 16), otherwise d.ddde+XX.
	s := strconv.FormatFloat(f, 'e', -1, 64) // e.g. "-1.2345e+06"
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	mant, expS, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expS)
	digits := strings.Replace(mant, ".", "", 1)
	if neg {
		dst = append(dst, '-')
	}
	if exp >= -4 && exp < 16 {
		if exp >= 0 {
			if len(digits) <= exp+1 {
				dst = append(dst, digits...)
				dst = append(dst, strings.Repeat("0", exp+1-len(digits))...)
				return append(dst, ".0"...)
			}
			dst = append(dst, digits[:exp+1]...)
			dst = append(dst, '.')
			return append(dst, digits[exp+1:]...)
		}
		dst = append(dst, "0."...)
		dst = append(dst, strings.Repeat("0", -exp-1)...)
		return append(dst, digits...)
	}
	dst = append(dst, digits[0])
	if len(digits) > 1 {
		dst = append(dst, '.')
		dst = append(dst, digits[1:]...)
	}
	dst = append(dst, 'e')
	if exp < 0 {
		dst = append(dst, '-')
		exp = -exp
	} else {
		dst = append(dst, '+')
	}
	if exp < 10 {
		dst = append(dst, '0')
	}
	return strconv.AppendInt(dst, int64(exp), 10)
}

const hexdigits = "0123456789abcdef"

// appendASCIIString renders s as a JSON string with Python's ensure_ascii
// escaping.
func appendASCIIString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"':
				dst = append(dst, '\\', '"')
			case c == '\\':
				dst = append(dst, '\\', '\\')
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c == '\b':
				dst = append(dst, '\\', 'b')
			case c == '\f':
				dst = append(dst, '\\', 'f')
			case c < 0x20 || c == 0x7f:
				dst = appendU(dst, rune(c))
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			dst = appendU(appendU(dst, hi), lo)
		} else {
			dst = appendU(dst, r)
		}
		i += size
	}
	return append(dst, '"')
}

func appendU(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u', hexdigits[r>>12&0xf], hexdigits[r>>8&0xf], hexdigits[r>>4&0xf], hexdigits[r&0xf])
}
