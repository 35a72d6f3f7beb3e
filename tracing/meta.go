package tracing

import (
	"bytes"
	"encoding/json"
	"errors"
)

var metaKeyBytes = []byte(MetaKey)

// FromMeta returns the span context that params (a JSON-RPC request's
// params) carry in _meta.traceparent. Params without one — not an object,
// no _meta, a traceparent that is not a string or does not parse — carry
// none: a trace context is correlation only, and a malformed one is
// dropped (W3C Trace Context §3.2.2.2), never an error of the call.
// Params that do not contain the word traceparent cost one byte scan.
func FromMeta(params []byte) (SpanContext, bool) {
	if !bytes.Contains(params, metaKeyBytes) {
		return SpanContext{}, false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(params, &top) != nil {
		return SpanContext{}, false
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(top["_meta"], &meta) != nil {
		return SpanContext{}, false
	}
	var s string
	if json.Unmarshal(meta[MetaKey], &s) != nil {
		return SpanContext{}, false
	}
	sc, err := ParseTraceparent(s)
	return sc, err == nil
}

// ErrNotObject is returned by WithMeta for params that are not a JSON
// object (or absent): they have no _meta to carry a traceparent.
var ErrNotObject = errors.New("tracing: params are not a JSON object")

// WithMeta returns params with _meta.traceparent set to sc's traceparent,
// every other member — of params and of _meta — kept. Absent or null
// params become {"_meta":{"traceparent":…}}; params that are not an
// object are returned unchanged with ErrNotObject.
func WithMeta(params json.RawMessage, sc SpanContext) (json.RawMessage, error) {
	p := bytes.TrimSpace(params)
	if len(p) == 0 || string(p) == "null" {
		p = []byte("{}")
	}
	var top map[string]json.RawMessage
	if p[0] != '{' || json.Unmarshal(p, &top) != nil {
		return params, ErrNotObject
	}
	if top == nil {
		top = map[string]json.RawMessage{}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := top["_meta"]; ok && string(bytes.TrimSpace(raw)) != "null" {
		if json.Unmarshal(raw, &meta) != nil || meta == nil {
			return params, errors.New("tracing: params._meta is not a JSON object")
		}
	}
	tp, _ := json.Marshal(sc.Traceparent())
	meta[MetaKey] = tp
	raw, err := marshal(meta)
	if err != nil {
		return params, err
	}
	top["_meta"] = raw
	return marshal(top)
}

// marshal encodes v without escaping <, > and &, so that the members it
// passes on keep their bytes' meaning and shape.
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
