package descriptor

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/registry/internal/pyjson"
)

// Descriptor is an RFC-005 capability descriptor (the reference's
// AgentDescriptor), normalized: defaults filled in, unknown members dropped,
// timestamps parsed.
type Descriptor struct {
	// AgentID is the logical agent name, e.g. "llm-1". Any string.
	AgentID string
	// NodePublicKey is the standard, padded base64 of the node's 32-byte
	// Ed25519 public key; it is the registry key and the signing key.
	NodePublicKey string
	// NetworkName must equal the registry's network.
	NetworkName string
	// Capabilities are the tags, in signed order, duplicates kept.
	Capabilities []string
	// Endpoint is where the agent is reachable.
	Endpoint Endpoint
	// RegisteredAt is the time of this announcement; ExpiresAt is strictly later.
	RegisteredAt, ExpiresAt Time
	// Metadata is free-form, signed, and never used for a trust decision.
	// It is the generic tree of encoding/json with UseNumber (object →
	// map[string]any); nil means {}.
	Metadata map[string]any
	// Signatures; only the first one counts.
	Signatures []Signature
}

// Endpoint is the reference's AgentEndpoint.
type Endpoint struct {
	Host string
	Port int
	// Scheme defaults to "ws". Genesis-Mesh peers use ws/wss; capmesh hosts
	// announce their JSON-RPC listener with "tcp" (newline JSON-RPC) or
	// "http"/"https" (the HTTP bridge).
	Scheme string
}

// URI returns scheme://host:port, as the reference's to_uri does.
func (e Endpoint) URI() string {
	host := e.Host
	if strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
		host = "[" + host + "]"
	}
	return fmt.Sprintf("%s://%s:%d", e.Scheme, host, e.Port)
}

// Signature is one {"key_id", "sig"} member of "signatures".
type Signature struct {
	KeyID string `json:"key_id"`
	Sig   string `json:"sig"`
}

// Reference error codes, shared by the HTTP and JSON-RPC bindings so that
// a client sees the same word whichever it used.
const (
	CodeInvalidJSON         = "invalid_json"
	CodeInvalidJSONObject   = "invalid_json_object"
	CodeInvalid             = "invalid_agent_descriptor"
	CodeSignatureRequired   = "descriptor_signature_required"
	CodeInvalidSignature    = "invalid_signature"
	CodeExpired             = "descriptor_expired"
	CodeNotYetValid         = "descriptor_not_yet_valid"
	CodeNetworkMismatch     = "descriptor_network_mismatch"
	CodeNoActiveCertificate = "node_has_no_active_certificate"
	CodeKeyRevoked          = "node_key_revoked"
	CodeRollback            = "descriptor_rollback"
)

// Error is a refusal with a stable machine-readable code (the reference's
// error.code words) and a human message.
type Error struct {
	Code    string
	Message string
	Details map[string]any
}

// Error returns "code: message".
func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Parse reads a descriptor from JSON. It checks the schema the way the
// reference model does (required members, types, 1 ≤ port ≤ 65535,
// expires_at strictly after registered_at) and is stricter only where the
// reference accepts what no honest signer produces: strings where numbers
// belong ("8443"), floats as ports (8443.0), numbers as timestamps, naive
// timestamps, and a signature object with "signature" instead of "sig".
// Unknown members are dropped at every level. Errors are *Error.
func Parse(data []byte) (*Descriptor, error) {
	if d, ok := fastParse(data); ok {
		return d, nil
	}
	return parseGeneric(data)
}

// parseGeneric is Parse through the generic tree: every input, every error.
func parseGeneric(data []byte) (*Descriptor, error) {
	v, err := pyjson.Decode(data)
	if err != nil {
		return nil, errorf(CodeInvalidJSON, "body is not valid JSON: %v", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errorf(CodeInvalidJSONObject, "body must be a JSON object")
	}
	return FromObject(obj)
}

// FromObject is Parse for an already decoded JSON object (from
// pyjson.Decode or encoding/json with UseNumber).
func FromObject(obj map[string]any) (*Descriptor, error) {
	d := &Descriptor{}
	var err error
	if d.AgentID, err = reqString(obj, "agent_id"); err != nil {
		return nil, err
	}
	if d.NodePublicKey, err = reqString(obj, "node_public_key"); err != nil {
		return nil, err
	}
	if d.NetworkName, err = reqString(obj, "network_name"); err != nil {
		return nil, err
	}
	if d.Capabilities, err = capabilitiesOf(obj); err != nil {
		return nil, err
	}
	rawEP, ok := obj["endpoint"]
	if !ok {
		return nil, invalid("endpoint is required")
	}
	if d.Endpoint, err = endpointOf(rawEP); err != nil {
		return nil, err
	}
	if d.RegisteredAt, err = reqTime(obj, "registered_at"); err != nil {
		return nil, err
	}
	if d.ExpiresAt, err = reqTime(obj, "expires_at"); err != nil {
		return nil, err
	}
	if !d.ExpiresAt.Instant().After(d.RegisteredAt.Instant()) {
		return nil, invalid("expires_at must be strictly after registered_at")
	}
	if raw, ok := obj["metadata"]; ok {
		m, ok := raw.(map[string]any)
		if !ok {
			return nil, invalid("metadata must be an object")
		}
		if _, err := pyjson.Marshal(m); err != nil {
			return nil, invalid("metadata: %v", err)
		}
		d.Metadata = m
	}
	if raw, ok := obj["signatures"]; ok {
		if d.Signatures, err = signaturesOf(raw); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// capabilitiesOf reads the optional capabilities array (empty, not nil,
// when absent).
func capabilitiesOf(obj map[string]any) ([]string, error) {
	caps := []string{}
	raw, ok := obj["capabilities"]
	if !ok {
		return caps, nil
	}
	arr, ok := raw.([]any)
	if !ok {
		return nil, invalid("capabilities must be an array of strings")
	}
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, invalid("capabilities[%d] must be a string", i)
		}
		caps = append(caps, s)
	}
	return caps, nil
}

// endpointOf reads the endpoint object {host, port, scheme}; the scheme
// defaults to "ws".
func endpointOf(raw any) (Endpoint, error) {
	var e Endpoint
	ep, ok := raw.(map[string]any)
	if !ok {
		return e, invalid("endpoint must be an object {host, port, scheme}")
	}
	var err error
	if e.Host, err = reqString(ep, "host"); err != nil {
		return e, invalid("endpoint.%s", err.(*Error).Message)
	}
	port, ok := ep["port"]
	if !ok {
		return e, invalid("endpoint.port is required")
	}
	n, ok := port.(json.Number)
	if !ok || strings.ContainsAny(string(n), ".eE") {
		return e, invalid("endpoint.port must be an integer")
	}
	p, perr := n.Int64()
	if perr != nil || p < 1 || p > 65535 {
		return e, invalid("endpoint.port must be between 1 and 65535")
	}
	e.Port = int(p)
	e.Scheme = "ws"
	if raw, ok := ep["scheme"]; ok {
		s, ok := raw.(string)
		if !ok {
			return e, invalid("endpoint.scheme must be a string")
		}
		if !validScheme(s) {
			return e, invalid("endpoint.scheme %q is not a URI scheme", s)
		}
		e.Scheme = s
	}
	return e, nil
}

// signaturesOf reads the signatures array of {key_id, sig} objects.
func signaturesOf(raw any) ([]Signature, error) {
	arr, ok := raw.([]any)
	if !ok {
		return nil, invalid("signatures must be an array")
	}
	var out []Signature
	for i, e := range arr {
		so, ok := e.(map[string]any)
		if !ok {
			return nil, invalid("signatures[%d] must be an object {key_id, sig}", i)
		}
		if _, has := so["sig"]; !has {
			if _, legacy := so["signature"]; legacy {
				return nil, invalid(`signatures[%d]: the member is "sig", not "signature" (the RFC-005 prose example is wrong; the reference rejects it too)`, i)
			}
		}
		var s Signature
		var err error
		if s.KeyID, err = reqString(so, "key_id"); err != nil {
			return nil, invalid("signatures[%d].%s", i, err.(*Error).Message)
		}
		if s.Sig, err = reqString(so, "sig"); err != nil {
			return nil, invalid("signatures[%d].%s", i, err.(*Error).Message)
		}
		out = append(out, s)
	}
	return out, nil
}

func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

func invalid(format string, args ...any) *Error { return errorf(CodeInvalid, format, args...) }

func reqString(obj map[string]any, name string) (string, error) {
	raw, ok := obj[name]
	if !ok {
		return "", invalid("%s is required", name)
	}
	s, ok := raw.(string)
	if !ok {
		return "", invalid("%s must be a string", name)
	}
	return s, nil
}

func reqTime(obj map[string]any, name string) (Time, error) {
	s, err := reqString(obj, name)
	if err != nil {
		return Time{}, err
	}
	t, perr := ParseTime(s)
	if perr != nil {
		return Time{}, invalid("%s: %v", name, perr)
	}
	return t, nil
}

// object returns the normalized model as a generic tree; with signatures
// when withSigs.
func (d *Descriptor) object(withSigs bool) map[string]any {
	caps := d.Capabilities
	if caps == nil {
		caps = []string{}
	}
	meta := d.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	scheme := d.Endpoint.Scheme
	if scheme == "" {
		scheme = "ws"
	}
	o := map[string]any{
		"agent_id":        d.AgentID,
		"node_public_key": d.NodePublicKey,
		"network_name":    d.NetworkName,
		"capabilities":    caps,
		"endpoint": map[string]any{
			"host":   d.Endpoint.Host,
			"port":   d.Endpoint.Port,
			"scheme": scheme,
		},
		"registered_at": d.RegisteredAt.String(),
		"expires_at":    d.ExpiresAt.String(),
		"metadata":      meta,
	}
	if withSigs {
		sigs := make([]any, 0, len(d.Signatures))
		for _, s := range d.Signatures {
			sigs = append(sigs, map[string]any{"key_id": s.KeyID, "sig": s.Sig})
		}
		o["signatures"] = sigs
	}
	return o
}

// CanonicalBytes returns the bytes the signature covers: the genesis
// canonical JSON of the normalized descriptor without "signatures".
func (d *Descriptor) CanonicalBytes() []byte {
	b, err := d.appendJSON(make([]byte, 0, 512), false)
	if err != nil {
		// Metadata was validated by Parse; a Descriptor built by hand with
		// an unsupported metadata value is a programming error.
		panic(fmt.Sprintf("descriptor: %v", err))
	}
	return b
}

// MarshalJSON writes the normalized descriptor with its signatures in the
// genesis canonical form (sorted keys, no spaces, ASCII only): byte for byte
// what the reference NA serves from GET /agents.
func (d *Descriptor) MarshalJSON() ([]byte, error) { return d.appendJSON(make([]byte, 0, 640), true) }

// encode returns the canonical signed bytes and the wire form (MarshalJSON)
// from one encoding: the members sort as agent_id … registered_at <
// signatures, so the wire form is the canonical bytes with the
// "signatures" member spliced in before the closing brace.
func (d *Descriptor) encode() (canonical, wire []byte, err error) {
	wire, err = d.appendJSON(make([]byte, 0, 640), false)
	if err != nil {
		return nil, nil, err
	}
	n := len(wire)
	canonical = wire[:n:n]
	wire = append(make([]byte, 0, n+40+len(d.Signatures)*(len(d.NodePublicKey)+112)), wire[:n-1]...)
	if wire, err = d.appendSignatures(append(wire, ',')); err != nil {
		return nil, nil, err
	}
	return canonical, append(wire, '}'), nil
}

// appendJSON appends the genesis canonical JSON of the normalized model —
// the 8 members in code-point order, defaults filled in — and, when
// withSigs, the "signatures" member last (it sorts last).
func (d *Descriptor) appendJSON(b []byte, withSigs bool) ([]byte, error) {
	var err error
	b = append(b, `{"agent_id":`...)
	if b, err = appendString(b, d.AgentID); err != nil {
		return nil, err
	}
	b = append(b, `,"capabilities":[`...)
	for i, c := range d.Capabilities {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = appendString(b, c); err != nil {
			return nil, err
		}
	}
	b = append(b, `],"endpoint":{"host":`...)
	if b, err = appendString(b, d.Endpoint.Host); err != nil {
		return nil, err
	}
	b = append(b, `,"port":`...)
	b = strconv.AppendInt(b, int64(d.Endpoint.Port), 10)
	b = append(b, `,"scheme":`...)
	scheme := d.Endpoint.Scheme
	if scheme == "" {
		scheme = "ws"
	}
	if b, err = appendString(b, scheme); err != nil {
		return nil, err
	}
	b = append(b, `},"expires_at":"`...)
	b = append(d.ExpiresAt.appendTo(b, true), `","metadata":`...)
	if len(d.Metadata) == 0 {
		b = append(b, "{}"...)
	} else {
		v, verr := pyjson.Value(d.Metadata)
		if verr != nil {
			return nil, verr
		}
		if b, err = canonical.Genesis.AppendCanonical(b, v); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"network_name":`...)
	if b, err = appendString(b, d.NetworkName); err != nil {
		return nil, err
	}
	b = append(b, `,"node_public_key":`...)
	if b, err = appendString(b, d.NodePublicKey); err != nil {
		return nil, err
	}
	b = append(b, `,"registered_at":"`...)
	b = append(d.RegisteredAt.appendTo(b, true), '"')
	if withSigs {
		if b, err = d.appendSignatures(append(b, ',')); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendSignatures appends the "signatures" member.
func (d *Descriptor) appendSignatures(b []byte) ([]byte, error) {
	var err error
	b = append(b, `"signatures":[`...)
	for i, s := range d.Signatures {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key_id":`...)
		if b, err = appendString(b, s.KeyID); err != nil {
			return nil, err
		}
		b = append(b, `,"sig":`...)
		if b, err = appendString(b, s.Sig); err != nil {
			return nil, err
		}
		b = append(b, '}')
	}
	return append(b, ']'), nil
}

// appendString appends s as the genesis profile writes strings (Python
// ensure_ascii escaping).
func appendString(b []byte, s string) ([]byte, error) {
	return canonical.Genesis.AppendCanonical(b, canonical.Value{Kind: canonical.String, Str: s})
}

// UnmarshalJSON is Parse.
func (d *Descriptor) UnmarshalJSON(b []byte) error {
	p, err := Parse(b)
	if err != nil {
		return err
	}
	*d = *p
	return nil
}

// Object returns the normalized descriptor (with signatures) as a generic
// JSON tree, for embedding in larger genesis-canonical documents.
func (d *Descriptor) Object() map[string]any { return d.object(true) }
