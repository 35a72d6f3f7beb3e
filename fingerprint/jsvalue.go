package fingerprint

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/capmesh/capmesh/canonical"
)

// JSON cannot carry every JavaScript value the reference hashes. Inputs use
// single-key marker objects for them (the convention of the reference test
// vectors, vectors-from-tests.json):
//
//	{"$undefined": true}        undefined
//	{"$function": "name"}       a function
//	{"$symbol": "desc"}         a symbol
//	{"$date": "2024-01-02T03:04:05.000Z"}  a Date (any string Date.parse reads as RFC 3339; "Invalid Date" for an invalid one)
//	{"$number": "-0"}           -0, NaN, Infinity or -Infinity
//	{"$bigint": "123"}          a BigInt
//	{"$ancestor": 0}            a reference to the n-th enclosing container (0 = the direct one): a cycle
//	{"$literal": {...}}         the object itself, for data that happens to look like a marker
//
// A single-key object whose key is one of these names is always a marker.
const (
	markUndefined = "$undefined"
	markFunction  = "$function"
	markSymbol    = "$symbol"
	markDate      = "$date"
	markNumber    = "$number"
	markBigInt    = "$bigint"
	markAncestor  = "$ancestor"
	markLiteral   = "$literal"
)

// Errors for values the reference cannot hash.
var (
	// ErrNotSerializable: a BigInt (JSON.stringify throws), or in an
	// invocation context a function, symbol or BigInt.
	ErrNotSerializable = errors.New("not JSON-serializable")
	// ErrCircular: the value contains a cycle.
	ErrCircular = errors.New("circular")
	// ErrInvalidDate: a Date marker whose time is invalid (toISOString throws).
	ErrInvalidDate = errors.New("invalid date")
	// ErrMarker: a malformed marker object.
	ErrMarker = errors.New("malformed marker")
)

// marker reports the marker name and argument of v, if v is a marker.
func marker(v canonical.Value) (string, canonical.Value, bool) {
	if v.Kind != canonical.Object || len(v.Obj) != 1 {
		return "", canonical.Value{}, false
	}
	switch k := v.Obj[0].Key; k {
	case markUndefined, markFunction, markSymbol, markDate, markNumber, markBigInt, markAncestor, markLiteral:
		return k, v.Obj[0].Value, true
	}
	return "", canonical.Value{}, false
}

// IsUndefined reports whether v is the {"$undefined": true} marker.
func IsUndefined(v canonical.Value) bool {
	k, _, ok := marker(v)
	return ok && k == markUndefined
}

// Undefined is the marker for JavaScript undefined.
var Undefined = canonical.Value{Kind: canonical.Object, Obj: []canonical.Member{{Key: markUndefined, Value: canonical.Value{Kind: canonical.Bool, Bool: true}}}}

// plain resolves the markers in v the way sortValue followed by
// JSON.stringify treats the values they stand for (HASHING.md §2.6): it
// returns ok=false when v itself vanishes (undefined, a function, a symbol).
//   - object members that are undefined, functions or symbols are dropped;
//   - array elements that are undefined, functions or symbols become null;
//   - a Date is {} (no own enumerable properties);
//   - -0 is 0, NaN and ±Infinity are null;
//   - a BigInt is ErrNotSerializable, a cycle ErrCircular.
func plain(v canonical.Value, depth int) (canonical.Value, bool, error) {
	if depth == 0 && !hasMarkers(v, 0) {
		return v, true, nil // plain JSON: nothing to resolve, no copy
	}
	if depth > maxDepth {
		return v, false, fmt.Errorf("nesting deeper than %d", maxDepth)
	}
	if k, arg, ok := marker(v); ok {
		switch k {
		case markUndefined, markFunction, markSymbol:
			return v, false, nil
		case markDate:
			return canonical.Value{Kind: canonical.Object}, true, nil
		case markNumber:
			f, err := markerNumber(arg)
			if err != nil {
				return v, false, err
			}
			return numberValue(f), true, nil
		case markBigInt:
			return v, false, fmt.Errorf("%w: BigInt value (JSON.stringify throws)", ErrNotSerializable)
		case markAncestor:
			return v, false, fmt.Errorf("%w: value refers to an enclosing container (JSON.stringify throws)", ErrCircular)
		case markLiteral:
			return plainContainer(arg, depth)
		}
	}
	return plainContainer(v, depth)
}

func plainContainer(v canonical.Value, depth int) (canonical.Value, bool, error) {
	switch v.Kind {
	case canonical.Array:
		out := canonical.Value{Kind: canonical.Array, Arr: make([]canonical.Value, len(v.Arr))}
		for i, x := range v.Arr {
			y, ok, err := plain(x, depth+1)
			if err != nil {
				return v, false, fmt.Errorf("[%d]: %w", i, err)
			}
			if !ok {
				y = canonical.Value{Kind: canonical.Null}
			}
			out.Arr[i] = y
		}
		return out, true, nil
	case canonical.Object:
		out := canonical.Value{Kind: canonical.Object, Obj: make([]canonical.Member, 0, len(v.Obj))}
		for _, m := range v.Obj {
			y, ok, err := plain(m.Value, depth+1)
			if err != nil {
				return v, false, fmt.Errorf(".%s: %w", m.Key, err)
			}
			if ok {
				out.Obj = append(out.Obj, canonical.Member{Key: m.Key, Value: y})
			}
		}
		return out, true, nil
	case canonical.Number:
		// JSON.parse reads an overflowing literal as ±Infinity.
		return v, true, nil
	}
	return v, true, nil
}

const maxDepth = 1000

func markerNumber(arg canonical.Value) (float64, error) {
	if arg.Kind == canonical.Number {
		return strconv.ParseFloat(arg.Str, 64)
	}
	if arg.Kind != canonical.String {
		return 0, fmt.Errorf("%w: $number wants a string", ErrMarker)
	}
	switch arg.Str {
	case "NaN":
		return math.NaN(), nil
	case "Infinity", "+Infinity":
		return math.Inf(1), nil
	case "-Infinity":
		return math.Inf(-1), nil
	}
	f, err := strconv.ParseFloat(arg.Str, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: $number %q", ErrMarker, arg.Str)
	}
	return f, nil
}

// numberValue is f as JSON.stringify would write it: NaN and ±Infinity
// become null, -0 becomes 0.
func numberValue(f float64) canonical.Value {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return canonical.Value{Kind: canonical.Null}
	}
	return canonical.Value{Kind: canonical.Number, Str: string(canonical.AppendJSNumber(nil, f))}
}

// dateISO renders a $date marker as Date.prototype.toISOString does
// (UTC, millisecond precision, "Z").
func dateISO(arg canonical.Value) (string, error) {
	var t time.Time
	switch arg.Kind {
	case canonical.String:
		if arg.Str == "Invalid Date" {
			return "", fmt.Errorf("%w: toISOString throws RangeError", ErrInvalidDate)
		}
		var err error
		t, err = time.Parse(time.RFC3339Nano, arg.Str)
		if err != nil {
			return "", fmt.Errorf("%w: %q is not an RFC 3339 time", ErrInvalidDate, arg.Str)
		}
	case canonical.Number: // milliseconds since the epoch, as new Date(ms)
		ms, err := strconv.ParseFloat(arg.Str, 64)
		if err != nil || math.Abs(ms) > 8.64e15 {
			return "", fmt.Errorf("%w: %s", ErrInvalidDate, arg.Str)
		}
		t = time.UnixMilli(int64(ms))
	default:
		return "", fmt.Errorf("%w: $date wants a string or a number", ErrMarker)
	}
	t = t.UTC().Truncate(time.Millisecond)
	y := t.Year()
	var b strings.Builder
	switch {
	case y >= 0 && y <= 9999:
		fmt.Fprintf(&b, "%04d", y)
	case y < 0:
		fmt.Fprintf(&b, "-%06d", -y)
	default:
		fmt.Fprintf(&b, "+%06d", y)
	}
	fmt.Fprintf(&b, "-%02d-%02dT%02d:%02d:%02d.%03dZ", t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond()/1e6)
	return b.String(), nil
}

// str is a string Value.
func str(s string) canonical.Value { return canonical.Value{Kind: canonical.String, Str: s} }

var null = canonical.Value{Kind: canonical.Null}

func strOrNull(s *string) canonical.Value {
	if s == nil {
		return null
	}
	return str(*s)
}

func member(k string, v canonical.Value) canonical.Member { return canonical.Member{Key: k, Value: v} }

// hasMarkers reports whether v contains a marker object anywhere (or is
// too deep to tell cheaply).
func hasMarkers(v canonical.Value, depth int) bool {
	if depth > maxDepth {
		return true
	}
	switch v.Kind {
	case canonical.Array:
		for _, x := range v.Arr {
			if hasMarkers(x, depth+1) {
				return true
			}
		}
	case canonical.Object:
		if _, _, ok := marker(v); ok {
			return true
		}
		for _, m := range v.Obj {
			if hasMarkers(m.Value, depth+1) {
				return true
			}
		}
	}
	return false
}
