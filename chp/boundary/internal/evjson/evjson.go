// Package evjson writes the JSON forms of a CHP evidence event that package
// boundary's sealer assembles, without encoding/json on the hot path: a
// payload, correlation or subject in its stored (compact, every string
// chp-stable-v1-escaped) and canonical forms in one pass (Dual), a denial
// or error member (Member), and the recorded result (AppendResult).
package evjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/chp"
)

// Subject is a subject's stored and canonical forms.
type Subject struct {
	Stored []byte // compact, chp-stable-v1 strings
	Canon  []byte // canonical, floats as Python renders them
}

// SubjectCache remembers the rendering of recent subjects: most callers
// present one of a few subjects, and parsing plus hashing one costs more than
// the rest of an event.
type SubjectCache struct {
	mu sync.RWMutex
	m  map[string]Subject
}

const subjectCacheSize = 1024

// Get returns the rendering of the subject raw, from the cache when it
// holds it. The zero SubjectCache is ready to use.
func (c *SubjectCache) Get(raw []byte) (Subject, error) {
	if string(raw) == chp.LocalSubject {
		return localSubject()
	}
	c.mu.RLock()
	si, ok := c.m[string(raw)]
	c.mu.RUnlock()
	if ok {
		return si, nil
	}
	si, err := RenderSubject(raw)
	if err != nil {
		return si, err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = make(map[string]Subject)
	}
	if len(c.m) >= subjectCacheSize {
		clear(c.m)
	}
	c.m[string(raw)] = si
	c.mu.Unlock()
	return si, nil
}

// RenderSubject returns a subject's stored and canonical forms (the latter
// as chp.AttributionDigest renders it: floats as Python does).
func RenderSubject(raw []byte) (Subject, error) {
	var si Subject
	v, err := canonical.Parse(raw)
	if err != nil {
		return si, err
	}
	if v.Kind != canonical.Object {
		return si, fmt.Errorf("subject is a %s, want an object", v.Kind)
	}
	if si.Stored, err = v.AppendJSON(nil); err != nil {
		return si, err
	}
	if si.Canon, err = canonical.PythonSortKeys.AppendCanonical(nil, v); err != nil {
		return si, err
	}
	return si, nil
}

// localSubject is the rendering of chp.LocalSubject, the subject of most
// calls made in process.
var localSubject = sync.OnceValues(func() (Subject, error) { return RenderSubject([]byte(chp.LocalSubject)) })

// Correlation writes a correlation object (whose baggage, when not {}, is
// parsed strictly: it must be a JSON object).
func (d *Dual) Correlation(c *chp.CorrelationContext) error {
	d.Raw("{")
	if len(c.Baggage) > 0 {
		d.Sep(`"baggage": `, `"baggage":`)
		if string(c.Baggage) == "{}" {
			d.Raw("{}")
		} else {
			v, err := canonical.Parse(c.Baggage)
			if err != nil || v.Kind != canonical.Object {
				return fmt.Errorf("%w: correlation.baggage must be a JSON object", chp.ErrBadEnvelope)
			}
			if d.K, err = v.AppendJSON(d.K); err == nil {
				d.C, err = canonical.PythonSortKeys.AppendCanonical(d.C, v)
			}
			if err != nil {
				return fmt.Errorf("%w: correlation.baggage: %v", chp.ErrBadEnvelope, err)
			}
		}
		d.Sep(", ", ",")
	}
	d.Sep(`"causation_id": `, `"causation_id":`)
	d.Nullable(c.CausationID)
	d.Sep(`, "correlation_id": `, `,"correlation_id":`)
	d.Str(c.CorrelationID)
	if c.Environment != "" {
		d.Sep(`, "environment": `, `,"environment":`)
		d.Str(c.Environment)
	}
	d.Sep(`, "parent_correlation_id": `, `,"parent_correlation_id":`)
	d.Nullable(c.ParentCorrelationID)
	d.Sep(`, "trace_id": `, `,"trace_id":`)
	d.Nullable(c.TraceID)
	d.Raw("}")
	return nil
}

// Dual writes a payload twice in one pass: its chp-stable-v1 form (C, which
// is hashed) and the compact form stored in the event (K): the same tokens
// without the spaces of ", " and ": ".
type Dual struct{ C, K []byte }

// Sep writes a separator: canon in the canonical form, compact in the
// stored one.
func (d *Dual) Sep(canon, compact string) { d.C, d.K = append(d.C, canon...), append(d.K, compact...) }

// Raw writes b in both forms.
func (d *Dual) Raw(b string) { d.C, d.K = append(d.C, b...), append(d.K, b...) }

// Nullable writes *s as a string, or null.
func (d *Dual) Nullable(s *string) {
	if s == nil {
		d.Raw("null")
		return
	}
	d.Str(*s)
}

// Str writes s as a chp-stable-v1 string in both forms.
func (d *Dual) Str(s string) {
	n := len(d.C)
	d.C = canonical.AppendChpStableString(d.C, s)
	d.K = append(d.K, d.C[n:]...)
}

// Value writes a generic payload value: canonical by package canonical,
// then compacted.
func (d *Dual) Value(v any) error {
	n := len(d.C)
	var err error
	if d.C, err = appendStableValue(d.C, v); err != nil {
		return err
	}
	d.K = canonical.CompactChpStable(d.K, d.C[n:])
	return nil
}

// Payload writes an event payload in both forms: payload's members and,
// when uri is not "", "capability_uri": uri (the common case, so most
// events need no map).
func (d *Dual) Payload(uri string, payload map[string]any) error {
	var keys []string
	if len(payload) > 0 {
		keys = make([]string, 0, len(payload)+1)
		for k := range payload {
			if !(k == "capability_uri" && uri != "") {
				keys = append(keys, k)
			}
		}
		if uri != "" {
			keys = append(keys, "capability_uri")
		}
		slices.Sort(keys) // byte order of UTF-8 = code point order
	} else if uri != "" {
		keys = uriPayloadKeys
	}
	d.Raw("{")
	for i, k := range keys {
		if i > 0 {
			d.Sep(", ", ",")
		}
		d.Str(k)
		d.Sep(": ", ":")
		if k == "capability_uri" && uri != "" {
			d.Str(uri)
			continue
		}
		if err := d.Value(payload[k]); err != nil {
			return fmt.Errorf("evjson: evidence payload %q: %w", k, err)
		}
	}
	d.Raw("}")
	return nil
}

var uriPayloadKeys = []string{"capability_uri"}

// appendStableValue appends the chp-stable-v1 form of a payload value.
func appendStableValue(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case string:
		return canonical.AppendChpStableString(dst, x), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case nil:
		return append(dst, "null"...), nil
	}
	cv, err := canonical.FromGo(v)
	if err != nil {
		return dst, err
	}
	return canonical.ChpStableV1.AppendCanonical(dst, cv)
}

// AppendRawOrNull appends raw, or null when raw is nil.
func AppendRawOrNull(dst, raw []byte) []byte {
	if raw == nil {
		return append(dst, "null"...)
	}
	return append(dst, raw...)
}

// Member encodes a denial or error member as it is stored, and its
// canonical form (as chp.AttributionDigest renders it) computed from exactly
// those bytes.
func Member(v any) ([]byte, []byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, nil, err
	}
	raw = buf.Bytes()
	cv, err := canonical.Parse(raw)
	if err != nil {
		return nil, nil, err
	}
	c, err := canonical.PythonSortKeys.AppendCanonical(nil, cv)
	return raw, c, err
}

// AppendResult appends res as JSON with the members encoding/json writes
// (the result is recorded for idempotent replay; reading it back with
// encoding/json gives the same InvocationResult). The correlation is the
// invocation's stored form, rendered once by header.
func AppendResult(dst []byte, res *chp.InvocationResult, corr []byte) ([]byte, error) {
	dst = append(dst, `{"capability_id":`...)
	dst = canonical.AppendChpStableString(dst, res.CapabilityID)
	dst = append(dst, `,"capability_version":`...)
	dst = AppendNullableString(dst, res.CapabilityVersion)
	dst = append(dst, `,"completed_at":`...)
	dst = canonical.AppendChpStableString(dst, res.CompletedAt)
	dst = append(dst, `,"correlation":`...)
	dst = append(dst, corr...)
	dst = append(dst, `,"data":`...)
	if res.Data == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, res.Data...)
	}
	for _, m := range [...]struct {
		key string
		v   any
		nil bool
	}{{`,"denial":`, res.Denial, res.Denial == nil}, {`,"error":`, res.Error, res.Error == nil}} {
		dst = append(dst, m.key...)
		if m.nil {
			dst = append(dst, "null"...)
			continue
		}
		b, err := json.Marshal(m.v)
		if err != nil {
			return dst, err
		}
		dst = append(dst, b...)
	}
	if res.EvidenceIDs == nil {
		dst = append(dst, `,"evidence_ids":null`...)
	} else {
		dst = append(dst, `,"evidence_ids":[`...)
		for i, id := range res.EvidenceIDs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = canonical.AppendChpStableString(dst, id)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"invocation_id":`...)
	dst = canonical.AppendChpStableString(dst, res.InvocationID)
	dst = append(dst, `,"outcome":`...)
	dst = canonical.AppendChpStableString(dst, string(res.Outcome))
	if res.Replayed {
		dst = append(dst, `,"replayed":true`...)
	}
	dst = append(dst, `,"started_at":`...)
	dst = AppendNullableString(dst, res.StartedAt)
	dst = append(dst, `,"success":`...)
	dst = strconv.AppendBool(dst, res.Success)
	return append(dst, '}'), nil
}

// AppendNullableString appends *s as a chp-stable-v1 string, or null.
func AppendNullableString(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	return canonical.AppendChpStableString(dst, *s)
}
