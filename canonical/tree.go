package canonical

import (
	"fmt"
)

// String returns the name of the kind ("null", "bool", ...).
func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case Bool:
		return "bool"
	case Number:
		return "number"
	case String:
		return "string"
	case Array:
		return "array"
	case Object:
		return "object"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Get returns the value of the member named key of an object, and whether
// there is one. It returns false for any other kind.
func (v Value) Get(key string) (Value, bool) {
	if v.Kind != Object {
		return Value{}, false
	}
	for _, m := range v.Obj {
		if m.Key == key {
			return m.Value, true
		}
	}
	return Value{}, false
}

// Without returns a copy of the object v minus the members named in keys
// (for example the "signatures" member before computing signed bytes). The
// copy shares the members' values with v. Any other kind is returned as is.
func (v Value) Without(keys ...string) Value {
	if v.Kind != Object {
		return v
	}
	obj := make([]Member, 0, len(v.Obj))
next:
	for _, m := range v.Obj {
		for _, k := range keys {
			if m.Key == k {
				continue next
			}
		}
		obj = append(obj, m)
	}
	return Value{Kind: Object, Obj: obj}
}

// AppendJSON appends v as compact JSON text that Parse reads back to an
// identical tree: members in their order, number literals as they are,
// strings with minimal escaping (lone surrogates as \uXXXX). It is not a
// canonical form; use a Profile for that.
func (v Value) AppendJSON(b []byte) ([]byte, error) {
	return appendJSON(b, v, 0)
}

func appendJSON(b []byte, v Value, depth int) ([]byte, error) {
	var err error
	switch v.Kind {
	case Null:
		return append(b, "null"...), nil
	case Bool:
		if v.Bool {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	case Number:
		if !validNumber(v.Str) {
			return b, fmt.Errorf("canonical: %w: %q", ErrInvalidNumber, v.Str)
		}
		return append(b, v.Str...), nil
	case String:
		return appendWTF8String(b, v.Str)
	case Array:
		if depth >= maxEncodeDepth {
			return b, fmt.Errorf("canonical: %w", errEncodeTooDeep)
		}
		b = append(b, '[')
		for i, x := range v.Arr {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendJSON(b, x, depth+1); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	case Object:
		if depth >= maxEncodeDepth {
			return b, fmt.Errorf("canonical: %w", errEncodeTooDeep)
		}
		b = append(b, '{')
		for i, m := range v.Obj {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendWTF8String(b, m.Key); err != nil {
				return b, err
			}
			b = append(b, ':')
			if b, err = appendJSON(b, m.Value, depth+1); err != nil {
				return b, err
			}
		}
		return append(b, '}'), nil
	}
	return b, fmt.Errorf("canonical: %w: %d", ErrInvalidKind, v.Kind)
}

// MarshalJSON writes v with AppendJSON, so a Value can sit in a struct field
// (for example free-form metadata) without losing number literals or
// member order.
func (v Value) MarshalJSON() ([]byte, error) { return v.AppendJSON(nil) }

// UnmarshalJSON parses data with Parse and the default limits.
func (v *Value) UnmarshalJSON(data []byte) error {
	nv, err := Parse(data)
	if err != nil {
		return err
	}
	*v = nv
	return nil
}
