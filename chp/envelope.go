package chp

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"
)

// TimeFormat is how capmesh writes every CHP timestamp: RFC 3339, UTC, fixed
// microsecond precision.
const TimeFormat = "2006-01-02T15:04:05.000000Z"

// FormatTime renders t in TimeFormat.
func FormatTime(t time.Time) string {
	var b [32]byte
	return string(appendTime(b[:0], t))
}

// NewID returns prefix + "_" + 32 random hex digits: 128 bits from a
// cryptographically strong generator, as chp-v0.2.md §13 expects of ids
// ("128-bit random by construction": a caller must not be able to guess
// another caller's invocation_id and replay its result).
//
// The bits come from ChaCha8 generators (math/rand/v2, a CSPRNG with fast
// key erasure) kept in a pool, each seeded from crypto/rand: an id costs
// tens of nanoseconds instead of a trip through the FIPS DRBG per id
// (docs/DECISIONS.md).
func NewID(prefix string) string {
	var id [1]string
	newIDs(id[:], prefix)
	return id[0]
}

// newIDs sets out[i] to NewID(prefixes[i]) for up to four prefixes, drawing
// the bits with one trip to the generator pool and the strings in one
// allocation.
func newIDs(out []string, prefixes ...string) {
	var raw [64]byte
	n := min(len(prefixes), 4)
	g := idPool.Get().(*mrand.ChaCha8)
	for i := 0; i < 16*n; i += 8 {
		binary.LittleEndian.PutUint64(raw[i:], g.Uint64())
	}
	idPool.Put(g)
	var buf [4*(maxIDPrefix+1) + 128]byte
	var ends [4]int
	b := buf[:0]
	for i, p := range prefixes[:n] {
		b = append(b, p...)
		b = append(b, '_')
		b = hex.AppendEncode(b, raw[16*i:16*i+16])
		ends[i] = len(b)
	}
	s := string(b)
	start := 0
	for i := range n {
		out[i] = s[start:ends[i]]
		start = ends[i]
	}
}

// maxIDPrefix bounds the prefixes newIDs writes without allocating.
const maxIDPrefix = 8

var idPool = sync.Pool{New: func() any {
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		panic("chp: crypto/rand failed: " + err.Error()) // never on Linux ≥ 3.17
	}
	return mrand.NewChaCha8(seed)
}}

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
	Subject       json.RawMessage `json:"subject"`
	Version       *string         `json:"version"`
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
	env := &InvocationEnvelope{Actor: w.Actor, Binding: w.Binding, Mandate: w.Mandate, Version: w.Version}
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

// localSubject is the subject of a call that names none. Shared, never
// modified.
var localSubject = json.RawMessage(`{"id":"local","type":"user"}`)

// emptyObject is the default baggage. Shared, never modified.
var emptyObject = json.RawMessage(`{}`)

// Normalize fills the defaults of an envelope built in Go: invocation id,
// mode sync, requested_at now, the local subject, an empty payload, and a
// generated correlation id when the caller gave none (or an empty one).
// A caller-provided correlation id is never changed.
func Normalize(env *InvocationEnvelope, now time.Time) {
	if env.InvocationID == "" && env.Correlation.CorrelationID == "" {
		var ids [2]string
		newIDs(ids[:], "inv", "corr")
		env.InvocationID, env.Correlation.CorrelationID = ids[0], ids[1]
		env.freshID = true
	}
	if env.InvocationID == "" {
		env.InvocationID = NewID("inv")
		env.freshID = true
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
