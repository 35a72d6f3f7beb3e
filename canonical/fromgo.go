package canonical

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// maxGoDepth bounds the direct walk over maps and slices, so that a cyclic
// map[string]any is an error instead of endless recursion.
const maxGoDepth = 1000

// FromGo returns the tree of a Go value as encoding/json would write it, so
// that packages can canonicalize their own structs: for every v,
// FromGo(v) equals Parse(json.Marshal(v)).
//
// The common dynamic types — nil, bool, string, json.Number, the integer and
// float types, map[string]any, []any, []string, json.RawMessage, Value — are
// converted directly, without an encoding round trip; anything else (structs,
// types with MarshalJSON, other maps and slices) goes through json.Marshal.
// Consequences worth knowing:
//   - map keys come out in byte order, as encoding/json writes them;
//   - a float64 holding an integral value (3.0) becomes the integer literal
//     "3", which Python-based profiles write as an int; use
//     json.Number("3.0") to get a Python float;
//   - NaN and ±Inf are errors;
//   - invalid UTF-8 in strings becomes U+FFFD, as in encoding/json;
//   - []byte becomes a base64 string, as in encoding/json.
func FromGo(v any) (Value, error) { return fromGo(v, 0) }

func fromGo(v any, depth int) (Value, error) {
	if depth > maxGoDepth {
		return Value{}, fmt.Errorf("canonical: FromGo: nesting deeper than %d (cyclic value?)", maxGoDepth)
	}
	switch t := v.(type) {
	case nil:
		return Value{Kind: Null}, nil
	case Value:
		return t, nil
	case *Value:
		if t == nil {
			return Value{Kind: Null}, nil
		}
		return *t, nil
	case bool:
		return Value{Kind: Bool, Bool: t}, nil
	case string:
		return Value{Kind: String, Str: validString(t)}, nil
	case json.Number:
		if !validNumber(string(t)) {
			return Value{}, fmt.Errorf("canonical: FromGo: invalid json.Number %q", string(t))
		}
		return Value{Kind: Number, Str: string(t)}, nil
	case json.RawMessage:
		if t == nil {
			return Value{Kind: Null}, nil
		}
		return Parse(t)
	case int:
		return intValue(int64(t)), nil
	case int8:
		return intValue(int64(t)), nil
	case int16:
		return intValue(int64(t)), nil
	case int32:
		return intValue(int64(t)), nil
	case int64:
		return intValue(t), nil
	case uint:
		return uintValue(uint64(t)), nil
	case uint8:
		return uintValue(uint64(t)), nil
	case uint16:
		return uintValue(uint64(t)), nil
	case uint32:
		return uintValue(uint64(t)), nil
	case uint64:
		return uintValue(t), nil
	case float64:
		return floatValue(t, 64)
	case float32:
		return floatValue(float64(t), 32)
	case []any:
		if t == nil {
			return Value{Kind: Null}, nil
		}
		arr := make([]Value, len(t))
		for i, x := range t {
			xv, err := fromGo(x, depth+1)
			if err != nil {
				return Value{}, err
			}
			arr[i] = xv
		}
		return Value{Kind: Array, Arr: arr}, nil
	case []string:
		if t == nil {
			return Value{Kind: Null}, nil
		}
		arr := make([]Value, len(t))
		for i, x := range t {
			arr[i] = Value{Kind: String, Str: validString(x)}
		}
		return Value{Kind: Array, Arr: arr}, nil
	case map[string]any:
		if t == nil {
			return Value{Kind: Null}, nil
		}
		obj := make([]Member, 0, len(t))
		for k, x := range t {
			xv, err := fromGo(x, depth+1)
			if err != nil {
				return Value{}, err
			}
			obj = append(obj, Member{Key: validString(k), Value: xv})
		}
		slices.SortFunc(obj, func(a, b Member) int {
			switch {
			case a.Key < b.Key:
				return -1
			case a.Key > b.Key:
				return 1
			}
			return 0
		})
		return Value{Kind: Object, Obj: obj}, nil
	default:
		data, err := json.Marshal(v)
		if err != nil {
			return Value{}, fmt.Errorf("canonical: FromGo: %w", err)
		}
		return Parse(data)
	}
}

func intValue(i int64) Value { return Value{Kind: Number, Str: strconv.FormatInt(i, 10)} }

func uintValue(u uint64) Value { return Value{Kind: Number, Str: strconv.FormatUint(u, 10)} }

// floatValue writes f the way encoding/json does, so that the direct walk and
// the json.Marshal fallback agree on every literal.
func floatValue(f float64, bits int) (Value, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return Value{}, fmt.Errorf("canonical: FromGo: unsupported value %v", f)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b := strconv.AppendFloat(make([]byte, 0, 24), f, format, -1, bits)
	if format == 'e' {
		// Clean up e-09 to e-9, as encoding/json does.
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return Value{Kind: Number, Str: string(b)}, nil
}

// validString replaces each invalid UTF-8 byte with U+FFFD, as encoding/json
// does when it writes a string.
func validString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return string(b)
}
