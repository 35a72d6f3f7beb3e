// Package pyjson adapts the registry's generic JSON trees to the shared
// canonical package's genesis profile (Python's json.dumps(sort_keys=True,
// separators=(",", ":")), ensure_ascii, Python float repr).
//
// The registry works on the generic tree encoding/json would give with
// UseNumber (map[string]any, []any, json.Number, string, bool, nil) because
// request bodies are free-form; this package converts that tree to and from
// canonical.Value without going through encoding/json, so number literals
// stay exact and lone UTF-16 surrogates survive (held as WTF-8 in Go
// strings, escaped back to \udXXX by the profile, as Python does).
package pyjson

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/canonical/govalue"
)

// Decode parses data (strict RFC 8259; duplicate keys are an error) into a
// generic tree.
func Decode(data []byte) (any, error) {
	v, err := canonical.Parse(data)
	if err != nil {
		return nil, err
	}
	return toGo(v), nil
}

func toGo(v canonical.Value) any {
	switch v.Kind {
	case canonical.Null:
		return nil
	case canonical.Bool:
		return v.Bool
	case canonical.Number:
		return json.Number(v.Str)
	case canonical.String:
		return v.Str
	case canonical.Array:
		out := make([]any, len(v.Arr))
		for i, e := range v.Arr {
			out[i] = toGo(e)
		}
		return out
	default:
		out := make(map[string]any, len(v.Obj))
		for _, m := range v.Obj {
			out[m.Key] = toGo(m.Value)
		}
		return out
	}
}

// Value converts a generic tree to a canonical.Value.
func Value(v any) (canonical.Value, error) {
	switch x := v.(type) {
	case nil:
		return canonical.Value{Kind: canonical.Null}, nil
	case bool:
		return canonical.Value{Kind: canonical.Bool, Bool: x}, nil
	case string:
		return canonical.Value{Kind: canonical.String, Str: x}, nil
	case json.Number:
		return canonical.Value{Kind: canonical.Number, Str: string(x)}, nil
	case int:
		return canonical.Value{Kind: canonical.Number, Str: strconv.Itoa(x)}, nil
	case int64:
		return canonical.Value{Kind: canonical.Number, Str: strconv.FormatInt(x, 10)}, nil
	case uint64:
		return canonical.Value{Kind: canonical.Number, Str: strconv.FormatUint(x, 10)}, nil
	case []string:
		out := canonical.Value{Kind: canonical.Array, Arr: make([]canonical.Value, len(x))}
		for i, s := range x {
			out.Arr[i] = canonical.Value{Kind: canonical.String, Str: s}
		}
		return out, nil
	case []any:
		out := canonical.Value{Kind: canonical.Array, Arr: make([]canonical.Value, len(x))}
		for i, e := range x {
			ev, err := Value(e)
			if err != nil {
				return canonical.Value{}, err
			}
			out.Arr[i] = ev
		}
		return out, nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := canonical.Value{Kind: canonical.Object, Obj: make([]canonical.Member, len(keys))}
		for i, k := range keys {
			ev, err := Value(x[k])
			if err != nil {
				return canonical.Value{}, err
			}
			out.Obj[i] = canonical.Member{Key: k, Value: ev}
		}
		return out, nil
	default:
		return canonical.Value{}, fmt.Errorf("pyjson: unsupported type %T", v)
	}
}

// Marshal renders v in the genesis canonical form.
func Marshal(v any) ([]byte, error) {
	cv, err := Value(v)
	if err != nil {
		return nil, err
	}
	return govalue.Marshal(canonical.Genesis, cv)
}
