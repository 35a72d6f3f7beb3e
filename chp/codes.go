package chp

// The reserved denial codes (chp-governance-v0.2.md §2), a closed set. A
// capmesh host uses these for every reserved condition; any other code it
// emits is reverse-DNS namespaced.
const (
	CodeCapabilityNotFound           = "capability_not_found"
	CodeCapabilityDisabled           = "capability_disabled"
	CodeUnsupportedMode              = "unsupported_mode"
	CodePolicyBlocked                = "policy_blocked"
	CodeEscalationRequired           = "escalation_required"
	CodeEvidenceRequired             = "evidence_required"
	CodeInputSchemaValidationFailed  = "input_schema_validation_failed"
	CodeOutputSchemaValidationFailed = "output_schema_validation_failed"
	CodeInvariantFailed              = "invariant_failed"
	CodeBudgetExceeded               = "budget_exceeded"
	CodeApprovalRequired             = "approval_required"
	CodeSafetyBlocked                = "safety_blocked"
	CodeMandateInvalid               = "mandate_invalid"
	CodeMandateExhausted             = "mandate_exhausted"
	CodeCapabilityVersionUnsupported = "capability_version_unsupported"
	CodeHostUnreachable              = "host_unreachable"
	CodeVersionUnsupported           = "version_unsupported"
)

// CodeIdempotencyConflict denies an invocation whose invocation_id this
// host already recorded for a different request (capability, version, mode,
// payload or caller): capmesh's own code, not a reserved one.
const CodeIdempotencyConflict = "io.github.capmesh.idempotency_conflict"

// reservedRetryable maps every reserved code to its normative retryable
// value. budget_exceeded is true as chp-invocation-pipeline.md §5 and the
// governance table say (the Python reference host sends false; see
// docs/DECISIONS.md). capability_disabled accompanies a skip; false.
var reservedRetryable = map[string]bool{
	CodeCapabilityNotFound:           false,
	CodeCapabilityDisabled:           false,
	CodeUnsupportedMode:              false,
	CodePolicyBlocked:                false,
	CodeEscalationRequired:           true,
	CodeEvidenceRequired:             true,
	CodeInputSchemaValidationFailed:  false,
	CodeOutputSchemaValidationFailed: false,
	CodeInvariantFailed:              false,
	CodeBudgetExceeded:               true,
	CodeApprovalRequired:             true,
	CodeSafetyBlocked:                false,
	CodeMandateInvalid:               false,
	CodeMandateExhausted:             false,
	CodeCapabilityVersionUnsupported: false,
	CodeHostUnreachable:              true,
	CodeVersionUnsupported:           false,
}

// IsReservedCode reports whether code is one of the 17 reserved denial codes.
func IsReservedCode(code string) bool {
	_, ok := reservedRetryable[code]
	return ok
}

// Retryable returns the normative retryable value of a reserved code (false
// for any other code).
func Retryable(code string) bool { return reservedRetryable[code] }
