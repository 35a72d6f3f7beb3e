package fingerprint

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/canonical/collate"
)

// NormalizeInvocationContext is normalizeInvocationContextForHash. It
// returns ok=false (no invocation hash, not an error) when the root is not
// a plain object, or nothing is left after the allowlist and dropping
// undefined values. allowlist filters top-level keys; empty means all.
//
// Within the context: undefined members are dropped, undefined array
// elements removed, Dates become ISO strings, -0/NaN/±Infinity pass through
// (JSON.stringify later writes 0/null), and "__proto__" keys vanish (the
// reference assigns them, which sets a prototype instead of a key).
// Functions, symbols and BigInts are errors naming their path, as are
// cycles ("invocationContext is circular at self.self").
func NormalizeInvocationContext(v canonical.Value, allowlist []string) (canonical.Value, bool, error) {
	if k, arg, ok := marker(v); ok {
		if k != markLiteral {
			return canonical.Value{}, false, nil // undefined, Date, number, … are not plain records
		}
		v = arg
	}
	if v.Kind != canonical.Object {
		return canonical.Value{}, false, nil
	}
	keys := make([]int, len(v.Obj))
	for i := range keys {
		keys[i] = i
	}
	slices.SortStableFunc(keys, func(a, b int) int { return collate.Compare(v.Obj[a].Key, v.Obj[b].Key) })
	if len(allowlist) > 0 {
		keys = slices.DeleteFunc(keys, func(i int) bool { return !slices.Contains(allowlist, v.Obj[i].Key) })
	}
	if len(keys) == 0 {
		return canonical.Value{}, false, nil
	}
	n := normalizer{root: v}
	out := canonical.Value{Kind: canonical.Object}
	for _, i := range keys {
		m := v.Obj[i]
		x, ok, err := n.value(m.Value, m.Key, []canonical.Value{v})
		if err != nil {
			return canonical.Value{}, false, err
		}
		if ok && m.Key != "__proto__" {
			out.Obj = append(out.Obj, member(m.Key, x))
		}
	}
	if len(out.Obj) == 0 {
		return canonical.Value{}, false, nil
	}
	return out, true, nil
}

type normalizer struct {
	root  canonical.Value
	depth int // recursion guard for cycles through arrays
}

// value normalizes x found at path; ancestors are the enclosing containers
// (outermost first), which {"$ancestor": n} markers refer to.
func (n *normalizer) value(x canonical.Value, path string, ancestors []canonical.Value) (canonical.Value, bool, error) {
	return n.valueOn(x, path, ancestors, map[*canonical.Member]bool{})
}

// valueOn is normalizeValue. visiting holds the objects on the reference's
// visit stack (every object being walked except the root), by identity.
func (n *normalizer) valueOn(x canonical.Value, path string, anc []canonical.Value, visiting map[*canonical.Member]bool) (canonical.Value, bool, error) {
	n.depth++
	defer func() { n.depth-- }()
	if n.depth > maxDepth {
		return x, false, &jsError{"invocationContext is circular at " + path, ErrCircular}
	}
	if k, arg, ok := marker(x); ok {
		switch k {
		case markUndefined:
			return x, false, nil
		case markFunction, markSymbol, markBigInt:
			t := map[string]string{markFunction: "function", markSymbol: "symbol", markBigInt: "bigint"}[k]
			return x, false, &jsError{"invocationContext not JSON-serializable at " + path + " (" + t + ") — use strings or numbers", ErrNotSerializable}
		case markDate:
			iso, err := dateISO(arg)
			if err != nil {
				return x, false, fmt.Errorf("invocationContext at %s: %w", path, err)
			}
			return str(iso), true, nil
		case markNumber:
			f, err := markerNumber(arg)
			if err != nil {
				return x, false, err
			}
			return numberValue(f), true, nil
		case markAncestor:
			i, err := strconv.Atoi(arg.Str)
			if arg.Kind != canonical.Number || err != nil || i < 0 || i >= len(anc) {
				return x, false, fmt.Errorf("%w: $ancestor %s at %s", ErrMarker, arg.Str, path)
			}
			target := len(anc) - 1 - i
			// Walk the referenced container again from here; if it is an
			// object on the visit stack, that walk reports the cycle.
			return n.valueOn(anc[target], path, anc[:target], visiting)
		case markLiteral:
			x = arg
		}
	}
	switch x.Kind {
	case canonical.Array:
		out := canonical.Value{Kind: canonical.Array, Arr: make([]canonical.Value, 0, len(x.Arr))}
		anc2 := append(slices.Clip(anc), x)
		for i, e := range x.Arr {
			y, ok, err := n.valueOn(e, path+"["+strconv.Itoa(i)+"]", anc2, visiting)
			if err != nil {
				return x, false, err
			}
			if ok {
				out.Arr = append(out.Arr, y)
			}
		}
		return out, true, nil
	case canonical.Object:
		keys := make([]int, len(x.Obj))
		for i := range keys {
			keys[i] = i
		}
		slices.SortStableFunc(keys, func(a, b int) int { return collate.Compare(x.Obj[a].Key, x.Obj[b].Key) })
		if len(x.Obj) > 0 {
			id := &x.Obj[0]
			if visiting[id] {
				return x, false, &jsError{"invocationContext is circular at " + path, ErrCircular}
			}
			visiting[id] = true
			defer delete(visiting, id)
		}
		anc2 := append(slices.Clip(anc), x)
		out := canonical.Value{Kind: canonical.Object, Obj: make([]canonical.Member, 0, len(x.Obj))}
		for _, i := range keys {
			m := x.Obj[i]
			p := m.Key
			if path != "" {
				p = path + "." + m.Key
			}
			y, ok, err := n.valueOn(m.Value, p, anc2, visiting)
			if err != nil {
				return x, false, err
			}
			if ok && m.Key != "__proto__" {
				out.Obj = append(out.Obj, member(m.Key, y))
			}
		}
		return out, true, nil
	}
	return x, true, nil
}

// InvocationPayload is invocationContextCanonicalPayload: {kind:
// "invocation", context}.
func InvocationPayload(context canonical.Value) canonical.Value {
	return new(tree).object(member("context", context), member("kind", str("invocation")))
}

// InvocationHash is computeInvocationContextHash: the hash of the payload
// of the normalized context, or ok=false when there is none.
func InvocationHash(v canonical.Value, allowlist []string) (hash string, ok bool, err error) {
	ctx, ok, err := NormalizeInvocationContext(v, allowlist)
	if err != nil || !ok {
		return "", false, err
	}
	h, err := hashPayload("", "", InvocationPayload(ctx), nil)
	return h, err == nil, err
}

// jsError carries the reference's exact error message and a sentinel for
// errors.Is.
type jsError struct {
	msg  string
	kind error
}

func (e *jsError) Error() string { return e.msg }
func (e *jsError) Unwrap() error { return e.kind }
