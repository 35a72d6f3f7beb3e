package state

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"time"

	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/store"
)

// Fill adds to t the stored certificates and the active CRL.
func (t *Authority) Fill(certs, crls []store.Record) error {
	for _, r := range certs {
		cs, err := ParseCertState(r.Value)
		if err != nil {
			return fmt.Errorf("registry: stored certificate %s: %w", r.Key, err)
		}
		t.AddCert(cs)
	}
	for _, r := range crls {
		if r.Key != "active" {
			continue
		}
		c, err := descriptor.ParseCRL(r.Value)
		if err != nil {
			return fmt.Errorf("registry: stored CRL: %w", err)
		}
		t.CRL = c
	}
	return nil
}

// SeedOf returns the private key stored as the seed of record name.
func SeedOf(rs []store.Record, name string) (ed25519.PrivateKey, bool) {
	for _, r := range rs {
		if r.Key == name && len(r.Value) == ed25519.SeedSize {
			return ed25519.NewKeyFromSeed(r.Value), true
		}
	}
	return nil, false
}

// Invite is an invite token's stored state (its record's key is the
// token's hash, TokenHash).
type Invite struct {
	Roles            []string  `json:"roles"`
	MaxValidityHours int       `json:"max_validity_hours"`
	ExpiresAt        time.Time `json:"expires_at"`
}

// FindInvite returns the invite of token among rs, nil when none.
func FindInvite(rs []store.Record, token string) (*Invite, error) {
	h := TokenHash(token)
	for _, r := range rs {
		if r.Key == h {
			var inv Invite
			if err := json.Unmarshal(r.Value, &inv); err != nil {
				return nil, err
			}
			return &inv, nil
		}
	}
	return nil, nil
}
