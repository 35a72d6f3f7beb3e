package chp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/capmesh/capmesh/canonical"
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
// cover subject, denial, error, sequence, capability_version or the
// correlation beyond its id. capmesh binds every such member through the
// event id (attribution.go). Events sealed by earlier versions mirrored some
// of them into the hashed payload under BindKey, which verification still
// checks where the payload is disclosed.

// BindKey is the payload member with which earlier capmesh versions bound
// the fields the upstream event hash leaves out (verified, no longer
// written).
const BindKey = "io.github.capmesh.bind"

// BindVersion versions the BindKey object (its member "v").
const BindVersion = 1

// emptyObjectCommitment is sha256("{}"), the commitment of an absent payload.
var emptyObjectCommitment = sha256Hex([]byte("{}"))

// PayloadCommitment returns sha256(chp-stable-v1(payload)); a nil or JSON null
// payload commits as the empty object {}. A foreign payload that carries
// floats (which rule 6 forbids, but the Python reference writes) is hashed as
// that reference hashes it.
func PayloadCommitment(payload json.RawMessage) (string, error) {
	if len(payload) == 0 || string(payload) == "null" {
		return emptyObjectCommitment, nil
	}
	v, err := canonical.Parse(payload)
	if err != nil {
		return "", err
	}
	return valueCommitment(v)
}

// valueCommitment is PayloadCommitment of a parsed payload.
func valueCommitment(v canonical.Value) (string, error) {
	if v.Kind == canonical.Null {
		return emptyObjectCommitment, nil
	}
	return hashValue(canonical.PythonSortKeys, v)
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
	return canonical.AppendChpStableString(dst, *s)
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
		b = canonical.AppendChpStableString(b, prev)
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

// eventView is a decoded event — ours or a foreign host's — as an ordered
// tree: numbers keep their literals and strings their exact code points
// (lone surrogates included), so recomputed hashes match the producer's.
type eventView struct{ canonical.Value }

// decodeEvent decodes one event object.
func decodeEvent(raw []byte) (eventView, error) {
	v, err := canonical.Parse(raw)
	if err != nil {
		return eventView{}, err
	}
	if v.Kind != canonical.Object {
		return eventView{}, errors.New("event is not a JSON object")
	}
	return eventView{v}, nil
}

// str returns a string member; nil when absent or null.
func (e eventView) str(key string) (*string, error) {
	v, ok := e.Get(key)
	if !ok || v.Kind == canonical.Null {
		return nil, nil
	}
	if v.Kind != canonical.String {
		return nil, fmt.Errorf("member %q is a %s, want string or null", key, v.Kind)
	}
	s := v.Str
	return &s, nil
}

// text returns a string member, "" when absent or not a string.
func (e eventView) text(key string) string {
	if v, ok := e.Get(key); ok && v.Kind == canonical.String {
		return v.Str
	}
	return ""
}

// correlationID returns correlation.correlation_id when it is a string.
func (e eventView) correlationID() *string {
	c, ok := e.Get("correlation")
	if !ok {
		return nil
	}
	if id, ok := c.Get("correlation_id"); ok && id.Kind == canonical.String {
		s := id.Str
		return &s
	}
	return nil
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
	s.CorrelationID = e.correlationID()
	switch scheme := e.text("hash_scheme"); scheme {
	case "":
		b, err := canonical.PythonSortKeys.AppendCanonical(nil, member(e.Value, "payload"))
		if err != nil {
			return nil, err
		}
		s.Payload = b
	case EventHashV2:
		s.V2 = true
		if c := e.text("payload_commitment"); c != "" {
			s.Commitment = &c
		} else {
			c, err := valueCommitment(member(e.Value, "payload"))
			if err != nil {
				return nil, err
			}
			s.Commitment = &c
		}
	default:
		return nil, fmt.Errorf("unknown hash_scheme %q", scheme)
	}
	return &s, nil
}

// payloadMatchesCommitment reports whether a v2 event's disclosed payload
// hashes to its payload_commitment.
func (e eventView) payloadMatchesCommitment() bool {
	c, err := valueCommitment(member(e.Value, "payload"))
	return err == nil && c == e.text("payload_commitment")
}

// MemberDigest is the digest the field binding (BindKey) holds for one
// top-level event member such as subject, denial or error: the lowercase hex
// sha256 of its chp-stable-v1 form (floats rendered as Python does), or ""
// — written as null — when the member is null or absent.
func MemberDigest(v canonical.Value) (string, error) {
	if v.Kind == canonical.Null {
		return "", nil
	}
	return hashValue(canonical.PythonSortKeys, v)
}

// memberDigestValue is MemberDigest as the value the binding holds.
func memberDigestValue(v canonical.Value) (canonical.Value, error) {
	d, err := MemberDigest(v)
	if err != nil || d == "" {
		return nullValue, err
	}
	return stringValue(d), nil
}

// boundMembers are the members of the BindKey object that mirror an event
// member, in the order verification reports them.
var boundMembers = []string{"capability_version", "causation_id", "denial", "error", "sequence", "subject"}

// bindWant returns what the BindKey object must hold for member k of ev.
func bindWant(ev eventView, k string) (canonical.Value, error) {
	switch k {
	case "subject", "denial", "error":
		return memberDigestValue(member(ev.Value, k))
	case "causation_id":
		return member(member(ev.Value, "correlation"), "causation_id"), nil
	default: // sequence, capability_version
		return member(ev.Value, k), nil
	}
}

// CheckBinding compares the BindKey object of one encoded event (when its
// payload carries one) with the event's top-level members. It returns the
// names of the members that differ; bound is false when the event carries no
// binding.
func CheckBinding(raw json.RawMessage) (mismatched []string, bound bool, err error) {
	ev, err := decodeEvent(raw)
	if err != nil {
		return nil, false, err
	}
	return checkBinding(ev)
}

// checkBinding is CheckBinding of a decoded event.
func checkBinding(ev eventView) (mismatched []string, ok bool, err error) {
	payload, _ := ev.Get("payload")
	bound, present := payload.Get(BindKey)
	if !present || bound.Kind != canonical.Object {
		return nil, false, nil
	}
	for _, k := range boundMembers {
		want, err := bindWant(ev, k)
		if err != nil {
			return nil, true, fmt.Errorf("bind %s: %w", k, err)
		}
		a, err1 := canonical.PythonSortKeys.AppendCanonical(nil, member(bound, k))
		b, err2 := canonical.PythonSortKeys.AppendCanonical(nil, want)
		if err1 != nil || err2 != nil || string(a) != string(b) {
			mismatched = append(mismatched, k)
		}
	}
	return mismatched, true, nil
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

// sha256Hex returns the lowercase hex SHA-256 of b.
func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// hashValue returns the lowercase hex SHA-256 of v's canonical form under p.
func hashValue(p canonical.Profile, v canonical.Value) (string, error) {
	sum, err := canonical.HashValue(p, v)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(sum[:]), nil
}

var nullValue = canonical.Value{Kind: canonical.Null}

func stringValue(s string) canonical.Value { return canonical.Value{Kind: canonical.String, Str: s} }

// member returns an object's member, Null when absent (or v not an object).
func member(v canonical.Value, key string) canonical.Value {
	m, ok := v.Get(key)
	if !ok {
		return nullValue
	}
	return m
}
