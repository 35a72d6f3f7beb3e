package registry

import (
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

// checkHours refuses a duration given to the Go API that is negative or
// longer than max hours; zero means the default.
func checkHours(name string, d time.Duration, max int64) error {
	if d < 0 || d > time.Duration(max)*time.Hour {
		return refuse(CodeWordInvalidParams, "%s must be between 1 and %d hours, not %s", name, max, d)
	}
	return nil
}
