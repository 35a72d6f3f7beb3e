package chp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Evidence hashing (chp-v0.2.md §2, §14).
//
// content_hash = sha256(chp-stable-v1({capability_id, correlation_id,
// event_id, event_type, host_id, invocation_id, outcome, payload | payload_commitment,
// prev_hash, timestamp})) where chp-event-hash-v2 events carry
// payload_commitment = sha256(chp-stable-v1(payload)) in place of the payload.
// root_hash = sha256(h1 "\n" h2 "\n" ...).
//
// Beyond the references (docs/DECISIONS.md): the stable object above does not
// cover subject, denial, error, sequence, capability_version or causation_id.
// capmesh mirrors them into the hashed payload under BindKey, so upstream
// verifiers still pass and ours detect an edit of any of them.

// BindKey is the payload member that binds the fields the upstream event hash
// leaves out.
const BindKey = "io.github.capmesh.bind"

// bindVersion versions the BindKey object.
const bindVersion = 1

// sha256Hex returns the lowercase hex SHA-256 of b.
func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// PayloadCommitment returns sha256(chp-stable-v1(payload)); a nil or JSON null
// payload commits as the empty object {}.
func PayloadCommitment(payload json.RawMessage) (string, error) {
	if len(payload) == 0 || string(payload) == "null" {
		return sha256Hex([]byte("{}")), nil
	}
	b, err := stableCanon(nil, payload, false)
	if err != nil {
		return "", err
	}
	return sha256Hex(b), nil
}

// stableEvent holds the members of the stable object. Pointers are null
// when nil.
type stableEvent struct {
	CapabilityID, CorrelationID, EventID, EventType, HostID, InvocationID *string
	Outcome                                                               *string
	Timestamp                                                             *string
	// Exactly one of Payload (v1, canonical bytes) or Commitment (v2).
	Payload    []byte
	Commitment *string
	V2         bool
}

func appendNullableString(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	return appendASCIIString(dst, *s)
}

// contentHash computes the content hash of the stable object linked to prev
// ("" = null).
func (s *stableEvent) contentHash(prev string) string {
	b := make([]byte, 0, 512)
	b = append(b, `{"capability_id": `...)
	b = appendNullableString(b, s.CapabilityID)
	b = append(b, `, "correlation_id": `...)
	b = appendNullableString(b, s.CorrelationID)
	b = append(b, `, "event_id": `...)
	b = appendNullableString(b, s.EventID)
	b = append(b, `, "event_type": `...)
	b = appendNullableString(b, s.EventType)
	b = append(b, `, "host_id": `...)
	b = appendNullableString(b, s.HostID)
	b = append(b, `, "invocation_id": `...)
	b = appendNullableString(b, s.InvocationID)
	b = append(b, `, "outcome": `...)
	b = appendNullableString(b, s.Outcome)
	if s.V2 {
		b = append(b, `, "payload_commitment": `...)
		b = appendNullableString(b, s.Commitment)
	} else {
		b = append(b, `, "payload": `...)
		if s.Payload == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, s.Payload...)
		}
	}
	b = append(b, `, "prev_hash": `...)
	if prev == "" {
		b = append(b, "null"...)
	} else {
		b = appendASCIIString(b, prev)
	}
	b = append(b, `, "timestamp": `...)
	b = appendNullableString(b, s.Timestamp)
	b = append(b, '}')
	return sha256Hex(b)
}

// RootHash is sha256 over each content hash followed by "\n".
func RootHash(contentHashes []string) string {
	h := sha256.New()
	for _, c := range contentHashes {
		h.Write([]byte(c))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// eventView is a decoded foreign event: every member as it appears on the
// wire (numbers as json.Number), absent members missing from the map.
type eventView map[string]any

func (e eventView) str(key string) (*string, error) {
	v, ok := e[key]
	if !ok || v == nil {
		return nil, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("member %q is %T, want string or null", key, v)
	}
	return &s, nil
}

// stable builds the stable object of a decoded event, under the hash scheme
// the event declares.
func (e eventView) stable() (*stableEvent, error) {
	var s stableEvent
	var err error
	for _, f := range []struct {
		dst **string
		key string
	}{
		{&s.CapabilityID, "capability_id"}, {&s.EventID, "event_id"}, {&s.EventType, "event_type"},
		{&s.HostID, "host_id"}, {&s.InvocationID, "invocation_id"}, {&s.Outcome, "outcome"},
		{&s.Timestamp, "timestamp"},
	} {
		if *f.dst, err = e.str(f.key); err != nil {
			return nil, err
		}
	}
	if c, ok := e["correlation"].(map[string]any); ok {
		if id, ok := c["correlation_id"].(string); ok {
			s.CorrelationID = &id
		}
	}
	scheme, _ := e["hash_scheme"].(string)
	switch scheme {
	case "":
		b, err := stableCanon(nil, e["payload"], false)
		if err != nil {
			return nil, err
		}
		s.Payload = b
	case EventHashV2:
		s.V2 = true
		if c, _ := e["payload_commitment"].(string); c != "" {
			s.Commitment = &c
		} else {
			b, err := stableCanon(nil, payloadOrEmpty(e["payload"]), false)
			if err != nil {
				return nil, err
			}
			c := sha256Hex(b)
			s.Commitment = &c
		}
	default:
		return nil, fmt.Errorf("unknown hash_scheme %q", scheme)
	}
	return &s, nil
}

func payloadOrEmpty(p any) any {
	if p == nil {
		return map[string]any{}
	}
	return p
}

// fieldDigest is the digest capmesh binds for one top-level member: the
// sha256 of its chp-stable-v1 form (floats rendered as Python does), or nil
// when the member is null or absent.
func fieldDigest(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	b, err := stableCanon(nil, v, false)
	if err != nil {
		return nil, err
	}
	return sha256Hex(b), nil
}

// bindObject builds the BindKey object for an event from its decoded
// top-level members.
func bindObject(ev eventView) (map[string]any, error) {
	m := map[string]any{"v": bindVersion}
	for _, k := range []string{"subject", "denial", "error"} {
		d, err := fieldDigest(ev[k])
		if err != nil {
			return nil, fmt.Errorf("bind %s: %w", k, err)
		}
		m[k] = d
	}
	m["sequence"] = ev["sequence"]
	m["capability_version"] = ev["capability_version"]
	var causation any
	if c, ok := ev["correlation"].(map[string]any); ok {
		causation = c["causation_id"]
	}
	m["causation_id"] = causation
	return m, nil
}

// checkBinding compares an event's BindKey object (when its payload carries
// one) with its top-level members. It returns the names of the members that
// differ; ok is false when the event carries no binding.
func checkBinding(ev eventView) (mismatched []string, ok bool, err error) {
	payload, _ := ev["payload"].(map[string]any)
	if payload == nil {
		return nil, false, nil
	}
	bound, present := payload[BindKey].(map[string]any)
	if !present {
		return nil, false, nil
	}
	want, err := bindObject(ev)
	if err != nil {
		return nil, true, err
	}
	for _, k := range []string{"capability_version", "causation_id", "denial", "error", "sequence", "subject"} {
		a, err1 := stableCanon(nil, bound[k], false)
		b, err2 := stableCanon(nil, want[k], false)
		if err1 != nil || err2 != nil || string(a) != string(b) {
			mismatched = append(mismatched, k)
		}
	}
	return mismatched, true, nil
}

// decodeEvent decodes one event object.
func decodeEvent(raw json.RawMessage) (eventView, error) {
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("event is not a JSON object")
	}
	return eventView(m), nil
}

// EventContentHash recomputes the content hash of one encoded event under
// the scheme it declares, linked to prev ("" = null).
func EventContentHash(raw json.RawMessage, prev string) (string, error) {
	ev, err := decodeEvent(raw)
	if err != nil {
		return "", err
	}
	s, err := ev.stable()
	if err != nil {
		return "", err
	}
	return s.contentHash(prev), nil
}

// uintString renders n for error messages.
func uintString(n uint64) string { return strconv.FormatUint(n, 10) }
