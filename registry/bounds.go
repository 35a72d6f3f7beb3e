package registry

import (
	"fmt"
	"time"
)

// Bounds of the hour counts operators and nodes pass in (registry.enroll
// validity_hours, registry.invite max_validity_hours and
// token_expiry_hours, and the same fields of POST /join, /renew and
// /admin/invite). A value outside [1, max] is refused with -32602 (HTTP
// 400) naming the bound: an hour count is multiplied into a
// time.Duration, and an unchecked one wraps around (5124096 hours became
// a 25-minute certificate) or, negative, used to fall back to the default
// without a word.
const (
	// MaxValidityHours bounds a join certificate's lifetime: ten years.
	MaxValidityHours = 87600
	// MaxTokenExpiryHours bounds an invite token's lifetime: one year.
	MaxTokenExpiryHours = 8760
)

// hoursParam checks an optional hour count named name: absent (nil) is
// def, otherwise it must lie in [1, max].
func hoursParam(name string, v *int64, def, max int64) (time.Duration, error) {
	if v == nil {
		return time.Duration(def) * time.Hour, nil
	}
	if *v < 1 || *v > max {
		return 0, refuse(CodeWordInvalidParams, "%s must be an integer between 1 and %d (hours), not %d", name, max, *v)
	}
	return time.Duration(*v) * time.Hour, nil
}

// checkHours refuses a duration given to the Go API that is negative or
// longer than max hours; zero means the default.
func checkHours(name string, d time.Duration, max int64) error {
	if d < 0 || d > time.Duration(max)*time.Hour {
		return refuse(CodeWordInvalidParams, "%s must be between 1 and %d hours, not %s", name, max, d)
	}
	return nil
}

// boundedIntError is the refusal of an HTTP body's integer member k
// outside [1, max].
func boundedIntError(k string, max int64) error {
	return fmt.Errorf("%s must be an integer between 1 and %d", k, max)
}
