package api

import (
	"fmt"
	"time"

	"github.com/capmesh/capmesh/registry"
)

// hoursParam checks an optional hour count named name: absent (nil) is
// def, otherwise it must lie in [1, max].
func hoursParam(name string, v *int64, def, max int64) (time.Duration, error) {
	if v == nil {
		return time.Duration(def) * time.Hour, nil
	}
	if *v < 1 || *v > max {
		return 0, registry.Refuse(registry.CodeWordInvalidParams, "%s must be an integer between 1 and %d (hours), not %d", name, max, *v)
	}
	return time.Duration(*v) * time.Hour, nil
}

// boundedIntError is the refusal of an HTTP body's integer member k
// outside [1, max].
func boundedIntError(k string, max int64) error {
	return fmt.Errorf("%s must be an integer between 1 and %d", k, max)
}

// nonEmpty is s, or def when s is empty.
func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// asSlice is v as a JSON array, or nil.
func asSlice(v any) []any { s, _ := v.([]any); return s }

// stringsOf is a JSON array's members as strings (a non-string is "").
func stringsOf(vs []any) []string {
	var out []string
	for _, v := range vs {
		s, _ := v.(string)
		out = append(out, s)
	}
	return out
}
