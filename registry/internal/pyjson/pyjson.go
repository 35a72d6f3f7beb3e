// Package pyjson writes JSON the way the Genesis-Mesh reference signs it:
// Python's json.dumps(obj, sort_keys=True, separators=(",", ":")) with the
// default ensure_ascii=True and Python's float repr.
//
// It is the registry's bridge until the shared canonical package's genesis
// profile lands; its input is the generic tree that encoding/json produces
// with Decoder.UseNumber (map[string]any, []any, json.Number, string, bool,
// nil), so number literals reach it exactly as written.
package pyjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Decode parses data into the generic tree Marshal expects, keeping number
// literals. Trailing data after the value is an error.
func Decode(data []byte) (any, error) {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after JSON value")
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

// Marshal renders v in the genesis canonical form.
func Marshal(v any) ([]byte, error) {
	var b strings.Builder
	if err := write(&b, v); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

func write(b *strings.Builder, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case string:
		WriteString(b, x)
	case json.Number:
		s, err := Number(string(x))
		if err != nil {
			return err
		}
		b.WriteString(s)
	case int:
		b.WriteString(strconv.Itoa(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case []string:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			WriteString(b, e)
		}
		b.WriteByte(']')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := write(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sortKeys(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			WriteString(b, k)
			b.WriteByte(':')
			if err := write(b, x[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("pyjson: unsupported type %T", v)
	}
	return nil
}

// sortKeys orders keys by Unicode code point, as Python sorts str keys.
// Byte-wise order of valid UTF-8 is code-point order.
func sortKeys(keys []string) { sort.Strings(keys) }

// WriteString writes s as a Python ensure_ascii JSON string.
func WriteString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				b.WriteString(`\"`)
			case '\\':
				b.WriteString(`\\`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			default:
				if c < 0x20 || c == 0x7f {
					b.WriteString(`\u00`)
					b.WriteByte(hex[c>>4])
					b.WriteByte(hex[c&0xf])
				} else {
					b.WriteByte(c)
				}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		writeU := func(u rune) {
			b.WriteString(`\u`)
			b.WriteByte(hex[(u>>12)&0xf])
			b.WriteByte(hex[(u>>8)&0xf])
			b.WriteByte(hex[(u>>4)&0xf])
			b.WriteByte(hex[u&0xf])
		}
		if r > 0xffff {
			r1, r2 := utf16.EncodeRune(r)
			writeU(r1)
			writeU(r2)
		} else {
			writeU(r)
		}
	}
	b.WriteByte('"')
}

// Number renders a JSON number literal as Python would after json.loads:
// integers exactly (arbitrary precision), floats with repr.
func Number(lit string) (string, error) {
	if !strings.ContainsAny(lit, ".eE") {
		n, ok := new(big.Int).SetString(lit, 10)
		if !ok {
			return "", fmt.Errorf("pyjson: invalid integer %q", lit)
		}
		return n.String(), nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			if math.IsInf(f, 0) {
				return "", fmt.Errorf("pyjson: number %q overflows a double (Python would write Infinity)", lit)
			}
			// Underflow to zero or a subnormal: Python accepts it.
		} else {
			return "", fmt.Errorf("pyjson: invalid number %q", lit)
		}
	}
	return Float(f), nil
}

// Float renders f as Python's repr does.
func Float(f float64) string {
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	// e looks like "-1.2345e+06"; the decimal exponent is after 'e'.
	idx := strings.LastIndexByte(e, 'e')
	exp, _ := strconv.Atoi(e[idx+1:])
	if exp >= -4 && exp < 16 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	mant := e[:idx]
	sign := "+"
	if exp < 0 {
		sign = "-"
		exp = -exp
	}
	es := strconv.Itoa(exp)
	if len(es) < 2 {
		es = "0" + es
	}
	return mant + "e" + sign + es
}
