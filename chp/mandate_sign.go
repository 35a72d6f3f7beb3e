package chp

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/canonical/govalue"
)

// MandateGrant is what a principal grants when it signs a mandate.
type MandateGrant struct {
	PrincipalID    string   // the principal's host id
	MandateID      string   // "" draws a fresh mnd_ id
	DelegateID     string   // who may act
	Scope          []string // capability ids or trailing-* prefixes
	ValidFrom      string   // RFC 3339
	ValidUntil     string   // RFC 3339, required
	CreatedAt      string   // RFC 3339; also the attestation's valid_from
	MaxInvocations int64    // 0: uncapped
}

// SignMandate returns the encoded mandate g signed with key. With parent (an
// encoded mandate) not nil it is a sub-mandate: g.PrincipalID should be
// the parent's delegate, and the parent is embedded as presented. It does
// not check that the child attenuates its parent — VerifyMandate does.
func SignMandate(g MandateGrant, key ed25519.PrivateKey, parent json.RawMessage) (json.RawMessage, error) {
	if g.MandateID == "" {
		g.MandateID = NewID("mnd")
	}
	scope := slices.Clone(g.Scope)
	slices.Sort(scope)
	m := map[string]any{
		"kind": "mandate", "mandate_id": g.MandateID, "delegate_id": g.DelegateID, "scope": scope,
		"valid_from": g.ValidFrom, "valid_until": g.ValidUntil, "created_at": g.CreatedAt,
		"canonicalization": Canonicalization,
	}
	keys := []string{"kind", "mandate_id", "delegate_id", "scope", "valid_from", "valid_until", "created_at", "canonicalization"}
	if parent != nil {
		p, err := ParseMandate(parent)
		if err != nil {
			return nil, fmt.Errorf("parent: %w", err)
		}
		m["depth"], m["parent_id"] = p.Depth+1, p.MandateID
		keys = append(keys, "depth", "parent_id")
	}
	if g.MaxInvocations != 0 {
		m["max_invocations"] = g.MaxInvocations
		keys = append(keys, "max_invocations")
	}
	if err := signStatement(m, keys, g.PrincipalID, g.CreatedAt, key); err != nil {
		return nil, err
	}
	if parent != nil {
		m["parent"] = parent
	}
	return json.Marshal(m)
}

// SignMandateRevocation returns the encoded revocation of mandateID by
// principalID, signed with key.
func SignMandateRevocation(principalID, mandateID, revokedAt, reason string, key ed25519.PrivateKey) (json.RawMessage, error) {
	s := map[string]any{
		"kind": "mandate-revocation", "mandate_id": mandateID, "revoked_at": revokedAt,
		"reason": reason, "canonicalization": Canonicalization,
	}
	if err := signStatement(s, []string{"kind", "mandate_id", "revoked_at", "reason", "canonicalization"},
		principalID, revokedAt, key); err != nil {
		return nil, err
	}
	return json.Marshal(s)
}

// signStatement signs the keys of s with key and attaches the principal
// block (attested from attestedFrom) and the signature block.
func signStatement(s map[string]any, keys []string, principalID, attestedFrom string, key ed25519.PrivateKey) error {
	hdr := make(map[string]any, len(keys))
	for _, k := range keys {
		hdr[k] = s[k]
	}
	hv, err := govalue.FromGo(hdr)
	if err != nil {
		return err
	}
	msg, err := canonical.ChpStableV1.AppendCanonical(nil, hv)
	if err != nil {
		return err
	}
	hi, err := NewHostIdentity(principalID, key, attestedFrom)
	if err != nil {
		return err
	}
	pub := key.Public().(ed25519.PublicKey)
	s["principal"] = map[string]any{"host_id": principalID, "public_key": hi.PublicKey, "host_identity": hi}
	s["signature"] = map[string]any{"algorithm": "ed25519", "key_id": KeyID(pub),
		"signature": base64.StdEncoding.EncodeToString(ed25519.Sign(key, msg))}
	return nil
}
