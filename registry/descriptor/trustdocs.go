package descriptor

import (
	"encoding/json"

	"github.com/capmesh/capmesh/registry/internal/pyjson"
)

// The authority's signed documents of RFC-001 in the reference's shape:
// the join certificate it issues to an enrolled node key and the CRL.
// Package registry issues, stores and checks them.

// JoinCertificate is the RFC-001 certificate the authority issues to an
// enrolled node key, in the reference's shape.
type JoinCertificate struct {
	CertID        string
	NodePublicKey string
	NetworkName   string
	Roles         []string
	IssuedAt      Time
	ExpiresAt     Time
	IssuedBy      string
	Signatures    []Signature
}

// Object is the certificate as a JSON object, with its signatures when
// withSigs (the signed bytes are PY_JSON of it without them).
func (c *JoinCertificate) Object(withSigs bool) map[string]any {
	roles := c.Roles
	if roles == nil {
		roles = []string{}
	}
	o := map[string]any{
		"cert_id": c.CertID, "node_public_key": c.NodePublicKey, "network_name": c.NetworkName,
		"roles": roles, "issued_at": c.IssuedAt.String(), "expires_at": c.ExpiresAt.String(), "issued_by": c.IssuedBy,
	}
	if withSigs {
		o["signatures"] = sigObjects(c.Signatures)
	}
	return o
}

// MarshalJSON writes the certificate in genesis canonical form.
func (c *JoinCertificate) MarshalJSON() ([]byte, error) { return pyjson.Marshal(c.Object(true)) }

// sigObjects is sigs as JSON objects {"key_id","sig"}.
func sigObjects(sigs []Signature) []any {
	out := make([]any, 0, len(sigs))
	for _, s := range sigs {
		out = append(out, map[string]any{"key_id": s.KeyID, "sig": s.Sig})
	}
	return out
}

// RevokedCertificate is one CRL entry.
type RevokedCertificate struct {
	CertificateID string `json:"certificate_id"`
	RevokedAt     Time   `json:"revoked_at"`
	Reason        string `json:"reason"`
	Issuer        string `json:"issuer"`
}

// CRL is the signed certificate revocation list.
type CRL struct {
	CRLID      string
	Sequence   int64
	IssuedAt   Time
	NextUpdate Time
	Issuer     string
	Revoked    []RevokedCertificate
	Signatures []Signature
}

// Object is the CRL as a JSON object, with its signatures when withSigs
// (the signed bytes are PY_JSON of it without them).
func (c *CRL) Object(withSigs bool) map[string]any {
	rev := make([]any, 0, len(c.Revoked))
	for _, r := range c.Revoked {
		rev = append(rev, map[string]any{"certificate_id": r.CertificateID, "revoked_at": r.RevokedAt.String(), "reason": r.Reason, "issuer": r.Issuer})
	}
	o := map[string]any{
		"crl_id": c.CRLID, "sequence": c.Sequence, "issued_at": c.IssuedAt.String(), "next_update": c.NextUpdate.String(),
		"issuer": c.Issuer, "revoked_certificates": rev,
	}
	if withSigs {
		o["signatures"] = sigObjects(c.Signatures)
	}
	return o
}

// MarshalJSON writes the CRL in genesis canonical form.
func (c *CRL) MarshalJSON() ([]byte, error) { return pyjson.Marshal(c.Object(true)) }

// ParseJoinCertificate reads a join certificate in its JSON form (as
// Object(true) writes it). It does not verify the signatures.
func ParseJoinCertificate(raw []byte) (*JoinCertificate, error) {
	v, err := pyjson.Decode(raw)
	if err != nil {
		return nil, err
	}
	o, _ := v.(map[string]any)
	c := &JoinCertificate{}
	str := func(k string) string { s, _ := o[k].(string); return s }
	c.CertID, c.NodePublicKey, c.NetworkName, c.IssuedBy = str("cert_id"), str("node_public_key"), str("network_name"), str("issued_by")
	for _, r := range asSlice(o["roles"]) {
		if s, ok := r.(string); ok {
			c.Roles = append(c.Roles, s)
		}
	}
	if c.IssuedAt, err = ParseTime(str("issued_at")); err != nil {
		return nil, err
	}
	if c.ExpiresAt, err = ParseTime(str("expires_at")); err != nil {
		return nil, err
	}
	c.Signatures = parseSigs(o["signatures"])
	return c, nil
}

// ParseCRL reads a CRL in its JSON form (as Object(true) writes it). It
// does not verify the signatures.
func ParseCRL(raw []byte) (*CRL, error) {
	v, err := pyjson.Decode(raw)
	if err != nil {
		return nil, err
	}
	o, _ := v.(map[string]any)
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	c := &CRL{CRLID: str(o, "crl_id"), Issuer: str(o, "issuer")}
	if num, ok := o["sequence"].(json.Number); ok {
		c.Sequence, _ = num.Int64()
	}
	if c.IssuedAt, err = ParseTime(str(o, "issued_at")); err != nil {
		return nil, err
	}
	if c.NextUpdate, err = ParseTime(str(o, "next_update")); err != nil {
		return nil, err
	}
	for _, e := range asSlice(o["revoked_certificates"]) {
		m, _ := e.(map[string]any)
		at, err := ParseTime(str(m, "revoked_at"))
		if err != nil {
			return nil, err
		}
		c.Revoked = append(c.Revoked, RevokedCertificate{CertificateID: str(m, "certificate_id"), RevokedAt: at, Reason: str(m, "reason"), Issuer: str(m, "issuer")})
	}
	c.Signatures = parseSigs(o["signatures"])
	return c, nil
}

// asSlice is v as a JSON array, or nil.
func asSlice(v any) []any { s, _ := v.([]any); return s }

// parseSigs reads a JSON array of {"key_id","sig"} objects.
func parseSigs(v any) []Signature {
	var out []Signature
	for _, e := range asSlice(v) {
		m, _ := e.(map[string]any)
		k, _ := m["key_id"].(string)
		s, _ := m["sig"].(string)
		out = append(out, Signature{KeyID: k, Sig: s})
	}
	return out
}
