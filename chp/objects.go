package chp

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Protocol versions. ProtocolVersion is what a capmesh host prefers; it also
// speaks every version in SupportedVersions (chp-v0.2.md §1.1).
const (
	ProtocolVersion = "0.2"
	// Canonicalization names the bundle-header canonical form we emit.
	Canonicalization = "chp-stable-v1"
	// CanonicalizationJCS is the RFC 8785 alternative a verifier must accept.
	CanonicalizationJCS = "chp-jcs-v1"
	// EventHashV2 is the per-event hash scheme we stamp on every event.
	EventHashV2 = "chp-event-hash-v2"
	// CompletenessScheme names the non-omission claim on exported bundles.
	CompletenessScheme = "chp-completeness-v1"
)

// SupportedVersions lists the wire versions a capmesh host speaks.
var SupportedVersions = []string{"0.1", "0.2"}

// Outcome is InvocationResult.outcome.
type Outcome string

// The five outcomes of chp-v0.1.md §8.
const (
	OutcomeSuccess       Outcome = "success"
	OutcomeFailure       Outcome = "failure"
	OutcomeDenied        Outcome = "denied"
	OutcomeSkipped       Outcome = "skipped"
	OutcomeIndeterminate Outcome = "indeterminate"
)

// Core evidence event types (chp-v0.1.md §6) and the governance families we
// emit (chp-governance-v0.2.md §4).
const (
	EventStarted       = "execution_started"
	EventCompleted     = "execution_completed"
	EventFailed        = "execution_failed"
	EventDenied        = "execution_denied"
	EventSkipped       = "execution_skipped"
	EventIndeterminate = "execution_indeterminate"

	EventBudgetExceeded    = "budget_exceeded"
	EventApprovalRequested = "approval_requested"

	EventSafetyStarted   = "safety_assessment_started"
	EventSafetyCompleted = "safety_assessment_completed"
	EventSafetyTriggered = "safety_guardrail_triggered"
	EventSafetyBlocked   = "safety_action_blocked"
	EventSafetyApproved  = "safety_action_approved"
)

// CorrelationContext is the causal context carried by invocations and events
// (schemas/correlation-context.schema.json). Optional members are pointers so
// that an explicit null round-trips.
type CorrelationContext struct {
	Baggage             json.RawMessage `json:"baggage,omitempty"`
	CausationID         *string         `json:"causation_id"`
	CorrelationID       string          `json:"correlation_id"`
	Environment         string          `json:"environment,omitempty"`
	ParentCorrelationID *string         `json:"parent_correlation_id"`
	TraceID             *string         `json:"trace_id"`
}

// AssuranceMetadata describes the strength of the evidence a host emits.
type AssuranceMetadata struct {
	EvidencePolicy string   `json:"evidence_policy"`
	Level          string   `json:"level"`
	Notes          []string `json:"notes"`
}

// DefaultAssurance is what capmesh stamps on capabilities and events.
func DefaultAssurance() AssuranceMetadata {
	return AssuranceMetadata{EvidencePolicy: "local-append-only", Level: "S1", Notes: []string{}}
}

// DenialReason explains a denied (or skipped) outcome
// (schemas/denial-reason.schema.json).
type DenialReason struct {
	Code        string          `json:"code"`
	Details     json.RawMessage `json:"details"`
	InvariantID *string         `json:"invariant_id"`
	Message     string          `json:"message"`
	Retryable   bool            `json:"retryable"`
}

// ErrorInfo describes a handler failure.
type ErrorInfo struct {
	Message string `json:"message"`
	Type    string `json:"type"`
}

// InvariantDescriptor declares a constraint on a capability
// (schemas/invariant-descriptor.schema.json). Host-enforced kinds capmesh
// evaluates: required_payload_fields ({"fields": [...]}), max_payload_bytes
// ({"max_bytes": n}) and expression ({"expression": "<CEL>"}, true = holds).
type InvariantDescriptor struct {
	Description     string          `json:"description"`
	Enforcement     string          `json:"enforcement"`
	FailureBehavior string          `json:"failure_behavior"`
	ID              string          `json:"id"`
	Kind            string          `json:"kind"`
	Parameters      json.RawMessage `json:"parameters"`
}

// AutonomyProfile is a capability's autonomy budget and approval tier
// (schemas/autonomy-profile.schema.json).
type AutonomyProfile struct {
	ActionLimit    *int64   `json:"action_limit"`
	RollbackPolicy string   `json:"rollback_policy"`
	SpendLimit     *float64 `json:"spend_limit"`
	SpendUnits     float64  `json:"spend_units"`
	Tier           string   `json:"tier"`
}

// CapabilityDescriptor declares one capability
// (schemas/capability-descriptor.schema.json). Autonomy is accepted on input
// (the reference hosts put it at top level) but the schema has no such member,
// so capmesh emits it as metadata.autonomy; see docs/DECISIONS.md.
//
// Enabled is accepted on input too (the TypeScript reference host's member;
// false registers the capability disabled) and never emitted: the schema
// has no such member and its status enum is a maturity level, so a capmesh
// host marks a disabled capability with metadata[EnabledKey] = false.
// Disabled reads every one of these marks.
type CapabilityDescriptor struct {
	Assurance     *AssuranceMetadata    `json:"assurance,omitempty"`
	Autonomy      *AutonomyProfile      `json:"autonomy,omitempty"`
	CapabilityURI string                `json:"capability_uri,omitempty"`
	Description   string                `json:"description"`
	Emits         []string              `json:"emits"`
	Enabled       *bool                 `json:"enabled,omitempty"`
	ID            string                `json:"id"`
	Idempotency   string                `json:"idempotency,omitempty"`
	InputSchema   json.RawMessage       `json:"input_schema,omitempty"`
	Invariants    []InvariantDescriptor `json:"invariants"`
	Metadata      json.RawMessage       `json:"metadata,omitempty"`
	Modes         []string              `json:"modes"`
	OutputSchema  json.RawMessage       `json:"output_schema,omitempty"`
	Owner         *string               `json:"owner,omitempty"`
	Risk          string                `json:"risk,omitempty"`
	Status        string                `json:"status,omitempty"`
	Tags          []string              `json:"tags"`
	TimeoutS      *float64              `json:"timeout_s,omitempty"`
	Version       string                `json:"version"`
}

// URI is the stable capability URI id:version.
func (d *CapabilityDescriptor) URI() string { return d.ID + ":" + d.Version }

// EnabledKey is the metadata member with which a capmesh host marks a
// registered but disabled capability (value false) in its descriptors, so
// an auditor can find one and check that invoking it is skipped
// (chp-v0.1.md §11 requirement 9).
const EnabledKey = "io.github.capmesh.enabled"

// Disabled reports whether the descriptor marks its capability as
// registered but disabled: metadata[EnabledKey] false (what capmesh emits),
// a top-level enabled false (the TypeScript reference's member) or status
// "disabled" (not a schema value, accepted from hosts that write it).
func (d *CapabilityDescriptor) Disabled() bool {
	if d.Enabled != nil && !*d.Enabled {
		return true
	}
	if strings.EqualFold(d.Status, "disabled") {
		return true
	}
	if isNull(d.Metadata) {
		return false
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(d.Metadata, &meta) != nil {
		return false
	}
	return string(bytes.TrimSpace(meta[EnabledKey])) == "false"
}

// EvidenceStoreInfo is HostDescriptor.evidence.
type EvidenceStoreInfo struct {
	AppendOnly bool   `json:"append_only"`
	Store      string `json:"store"`
}

// HostDescriptor declares a host (schemas/host-descriptor.schema.json).
type HostDescriptor struct {
	Assurance         string                 `json:"assurance"`
	Capabilities      []CapabilityDescriptor `json:"capabilities"`
	Evidence          EvidenceStoreInfo      `json:"evidence"`
	HostIdentity      *HostIdentity          `json:"host_identity,omitempty"`
	HostVersion       string                 `json:"host_version"`
	ID                string                 `json:"id"`
	KeyID             string                 `json:"key_id,omitempty"`
	Kind              string                 `json:"kind"`
	Metadata          json.RawMessage        `json:"metadata"`
	ProtocolVersion   string                 `json:"protocol_version"`
	PublicKey         string                 `json:"public_key,omitempty"`
	SupportedVersions []string               `json:"supported_versions"`
	Version           string                 `json:"version"`
}

// InvocationEnvelope requests one capability execution
// (schemas/invocation-envelope.schema.json). Parse it with ParseEnvelope,
// which fills the defaults real callers leave out.
type InvocationEnvelope struct {
	Actor        json.RawMessage    `json:"actor,omitempty"`
	Binding      json.RawMessage    `json:"binding,omitempty"`
	CapabilityID string             `json:"capability_id"`
	Correlation  CorrelationContext `json:"correlation"`
	InvocationID string             `json:"invocation_id"`
	Mandate      json.RawMessage    `json:"mandate,omitempty"`
	Metadata     json.RawMessage    `json:"metadata,omitempty"`
	Mode         string             `json:"mode"`
	Payload      json.RawMessage    `json:"payload"`
	RequestedAt  string             `json:"requested_at"`
	// RequestedCapabilityVersion, when set, is a semver range the resolved
	// capability version must satisfy (chp-v0.2.md §1, proposal 0028).
	RequestedCapabilityVersion *string         `json:"requested_capability_version,omitempty"`
	Subject                    json.RawMessage `json:"subject"`
	Version                    *string         `json:"version,omitempty"`
}

// InvocationResult is the outcome of one invocation
// (schemas/invocation-result.schema.json, plus `replayed` of chp-v0.2.md §13).
type InvocationResult struct {
	CapabilityID      string             `json:"capability_id"`
	CapabilityVersion *string            `json:"capability_version"`
	CompletedAt       string             `json:"completed_at"`
	Correlation       CorrelationContext `json:"correlation"`
	Data              json.RawMessage    `json:"data"`
	Denial            *DenialReason      `json:"denial"`
	Error             *ErrorInfo         `json:"error"`
	EvidenceIDs       []string           `json:"evidence_ids"`
	InvocationID      string             `json:"invocation_id"`
	Outcome           Outcome            `json:"outcome"`
	Replayed          bool               `json:"replayed,omitempty"`
	StartedAt         *string            `json:"started_at"`
	Success           bool               `json:"success"`
}

// EvidenceEvent is one structured record of execution truth
// (schemas/evidence-event.schema.json). Members are declared in sorted order
// so that encoding/json writes sorted keys, as the HTTP binding asks.
type EvidenceEvent struct {
	Assurance         AssuranceMetadata  `json:"assurance"`
	CapabilityID      string             `json:"capability_id"`
	CapabilityVersion *string            `json:"capability_version"`
	ContentHash       *string            `json:"content_hash"`
	Correlation       CorrelationContext `json:"correlation"`
	Denial            *DenialReason      `json:"denial"`
	Error             *ErrorInfo         `json:"error"`
	EventID           string             `json:"event_id"`
	EventType         string             `json:"event_type"`
	HashScheme        string             `json:"hash_scheme,omitempty"`
	HostID            string             `json:"host_id"`
	InvocationID      string             `json:"invocation_id"`
	Outcome           *Outcome           `json:"outcome"`
	Payload           json.RawMessage    `json:"payload"`
	PayloadCommitment string             `json:"payload_commitment,omitempty"`
	PrevHash          *string            `json:"prev_hash"`
	Redacted          bool               `json:"redacted"`
	Sequence          uint64             `json:"sequence"`
	Subject           json.RawMessage    `json:"subject"`
	Timestamp         string             `json:"timestamp"`
}

// ReplayQuery asks for the evidence of one correlation
// (schemas/replay-query.schema.json). SinceSequence is exclusive.
type ReplayQuery struct {
	CorrelationID   string  `json:"correlation_id"`
	IncludePayloads *bool   `json:"include_payloads,omitempty"`
	Limit           *int    `json:"limit,omitempty"`
	SinceSequence   *uint64 `json:"since_sequence,omitempty"`
}

// ReplayResult is the ordered evidence of one correlation
// (schemas/replay-result.schema.json). Events are kept as the raw JSON the
// store holds, so replay never re-encodes (and never alters) a record.
type ReplayResult struct {
	CorrelationID string            `json:"correlation_id"`
	EventCount    int               `json:"event_count"`
	Events        []json.RawMessage `json:"events"`
	ReplayedAt    string            `json:"replayed_at"`
	Truncated     bool              `json:"truncated,omitempty"`
}

// ChainVerification is the /verify result: the host's own check of one
// correlation's hash chain (chp-http-binding.md §4).
type ChainVerification struct {
	CorrelationID       string   `json:"correlation_id"`
	EventCount          int      `json:"event_count"`
	FirstBrokenSequence *uint64  `json:"first_broken_sequence"`
	Reason              string   `json:"reason,omitempty"`
	UnverifiedCount     int      `json:"unverified_count"`
	Valid               bool     `json:"valid"`
	VerifiedCount       int      `json:"verified_count"`
	Problems            []string `json:"problems,omitempty"`
}

// Completeness is the chp-completeness-v1 non-omission claim of a bundle.
type Completeness struct {
	AsOfSequence  uint64 `json:"as_of_sequence"`
	CorrelationID string `json:"correlation_id"`
	HeadHash      string `json:"head_hash"`
	Scheme        string `json:"scheme"`
}

// HostIdentity is the self-signed host-identity attestation (chp-v0.2.md §3).
type HostIdentity struct {
	Anchors    json.RawMessage `json:"anchors,omitempty"`
	HostID     string          `json:"host_id"`
	KeyID      string          `json:"key_id"`
	PublicKey  string          `json:"public_key"`
	Signature  string          `json:"signature"`
	ValidFrom  *string         `json:"valid_from"`
	ValidUntil *string         `json:"valid_until"`
}

// BundleSignature is the ed25519 signature block of a signed bundle.
type BundleSignature struct {
	Algorithm string `json:"algorithm"`
	KeyID     string `json:"key_id"`
	Signature string `json:"signature"`
}

// EvidenceBundle is an exported correlation (chp-v0.2.md §3,
// schemas/evidence-bundle.schema.json).
type EvidenceBundle struct {
	Assurance        string            `json:"assurance"`
	Canonicalization string            `json:"canonicalization"`
	Completeness     *Completeness     `json:"completeness,omitempty"`
	CreatedAt        string            `json:"created_at"`
	Events           []json.RawMessage `json:"events"`
	HostID           string            `json:"host_id"`
	HostIdentity     *HostIdentity     `json:"host_identity,omitempty"`
	ProtocolVersion  string            `json:"protocol_version"`
	PublicKey        string            `json:"public_key,omitempty"`
	RootHash         string            `json:"root_hash"`
	Signature        *BundleSignature  `json:"signature,omitempty"`
}

// IdentityDocument is served at /.well-known/chp-identity.
type IdentityDocument struct {
	Assurance    string        `json:"assurance"`
	HostIdentity *HostIdentity `json:"host_identity,omitempty"`
	KeyID        string        `json:"key_id,omitempty"`
	PublicKey    string        `json:"public_key,omitempty"`
}
