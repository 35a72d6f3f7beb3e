package chp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrBadEnvelope reports an envelope that cannot become an invocation.
var ErrBadEnvelope = errors.New("chp: malformed invocation envelope")

// wireEnvelope is the lenient shape accepted on input.
type wireEnvelope struct {
	Actor         json.RawMessage `json:"actor"`
	Arguments     json.RawMessage `json:"arguments"`
	Binding       json.RawMessage `json:"binding"`
	CapabilityID  *string         `json:"capability_id"`
	Correlation   json.RawMessage `json:"correlation"`
	CorrelationID *string         `json:"correlation_id"`
	InvocationID  *string         `json:"invocation_id"`
	Mandate       json.RawMessage `json:"mandate"`
	Metadata      json.RawMessage `json:"metadata"`
	Mode          *string         `json:"mode"`
	Payload       json.RawMessage `json:"payload"`
	RequestedAt   *string         `json:"requested_at"`
	// RequestedCapabilityVersion is a semver range (chp-v0.2.md §1).
	RequestedCapabilityVersion *string         `json:"requested_capability_version"`
	Subject                    json.RawMessage `json:"subject"`
	Version                    *string         `json:"version"`
}

func isNull(r json.RawMessage) bool {
	r = bytes.TrimSpace(r)
	return len(r) == 0 || string(r) == "null"
}

func isObject(r json.RawMessage) bool {
	r = bytes.TrimSpace(r)
	return len(r) > 0 && r[0] == '{'
}

// ParseEnvelope decodes an InvocationEnvelope leniently, the way real callers
// send it (the reference defaults): a missing invocation_id, mode, subject,
// requested_at or correlation is filled in, an empty correlation id is
// replaced by a generated one, a top-level correlation_id is lifted into
// correlation, and `arguments` is accepted for `payload`. Type errors and a
// non-object payload are rejected with an error wrapping ErrBadEnvelope.
// capability_id may be empty: that is a processed denial, not a parse error.
func ParseEnvelope(data []byte) (*InvocationEnvelope, error) {
	var w wireEnvelope
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadEnvelope, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data", ErrBadEnvelope)
	}
	env := &InvocationEnvelope{Actor: w.Actor, Binding: w.Binding, Mandate: w.Mandate, Version: w.Version,
		RequestedCapabilityVersion: w.RequestedCapabilityVersion}
	if w.CapabilityID != nil {
		env.CapabilityID = *w.CapabilityID
	}
	if w.InvocationID != nil {
		env.InvocationID = *w.InvocationID
	}
	if w.Mode != nil {
		env.Mode = *w.Mode
	}
	if w.RequestedAt != nil {
		env.RequestedAt = *w.RequestedAt
	}
	payload := w.Payload
	if isNull(payload) && !isNull(w.Arguments) {
		payload = w.Arguments
	}
	if isNull(payload) {
		payload = json.RawMessage("{}")
	} else if !isObject(payload) {
		return nil, fmt.Errorf("%w: payload must be a JSON object", ErrBadEnvelope)
	}
	env.Payload = payload
	if !isNull(w.Subject) {
		if !isObject(w.Subject) {
			return nil, fmt.Errorf("%w: subject must be a JSON object", ErrBadEnvelope)
		}
		env.Subject = w.Subject
	}
	if !isNull(w.Metadata) {
		if !isObject(w.Metadata) {
			return nil, fmt.Errorf("%w: metadata must be a JSON object", ErrBadEnvelope)
		}
		env.Metadata = w.Metadata
	}
	if !isNull(w.Correlation) {
		if err := json.Unmarshal(w.Correlation, &env.Correlation); err != nil {
			return nil, fmt.Errorf("%w: correlation: %v", ErrBadEnvelope, err)
		}
		if !isNull(env.Correlation.Baggage) && !isObject(env.Correlation.Baggage) {
			return nil, fmt.Errorf("%w: correlation.baggage must be an object", ErrBadEnvelope)
		}
	}
	if env.Correlation.CorrelationID == "" && w.CorrelationID != nil {
		env.Correlation.CorrelationID = *w.CorrelationID
	}
	Normalize(env, time.Now())
	return env, nil
}

// LocalSubject is the subject Normalize gives a call that names none.
const LocalSubject = `{"id":"local","type":"user"}`

// localSubject is LocalSubject as the envelope holds it. Shared, never
// modified.
var localSubject = json.RawMessage(LocalSubject)

// emptyObject is the default baggage. Shared, never modified.
var emptyObject = json.RawMessage(`{}`)

// Normalize fills the defaults of an envelope built in Go: invocation id,
// mode sync, requested_at now, the local subject, an empty payload, and a
// generated correlation id when the caller gave none (or an empty one).
// A caller-provided correlation id is never changed.
func Normalize(env *InvocationEnvelope, now time.Time) {
	if env.InvocationID == "" && env.Correlation.CorrelationID == "" {
		var ids [2]string
		NewIDs(ids[:], "inv", "corr")
		env.InvocationID, env.Correlation.CorrelationID = ids[0], ids[1]
	}
	if env.InvocationID == "" {
		env.InvocationID = NewID("inv")
	}
	if env.Mode == "" {
		env.Mode = "sync"
	}
	if env.RequestedAt == "" {
		env.RequestedAt = FormatTime(now)
	}
	if isNull(env.Payload) {
		env.Payload = json.RawMessage("{}")
	}
	if isNull(env.Subject) {
		env.Subject = localSubject
	}
	if env.Correlation.CorrelationID == "" {
		env.Correlation.CorrelationID = NewID("corr")
	}
	if isNull(env.Correlation.Baggage) {
		env.Correlation.Baggage = emptyObject
	}
}
