package registry

// Bounds of the hour counts operators and nodes pass in (registry.enroll
// validity_hours, registry.invite max_validity_hours and
// token_expiry_hours, and the same fields of POST /join, /renew and
// /admin/invite). A value outside [1, max] is refused with -32602 (HTTP
// 400) naming the bound (state.CheckHours): an hour count is multiplied
// into a time.Duration, and an unchecked one wraps around (5124096 hours
// became a 25-minute certificate) or, negative, used to fall back to the
// default without a word.
const (
	// MaxValidityHours bounds a join certificate's lifetime: ten years.
	MaxValidityHours = 87600
	// MaxTokenExpiryHours bounds an invite token's lifetime: one year.
	MaxTokenExpiryHours = 8760
)
