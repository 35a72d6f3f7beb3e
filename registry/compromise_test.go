package registry_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/descriptor"
)

// TestKeyCompromiseOfAKeyWhoseCertificatesAreRevoked: a node key whose
// every certificate was already revoked (for cessation) is revoked by
// key for key_compromise. It must be blocked for good: a pinned key is
// no longer trusted, and no key is enrolled again. Before, the
// revocation found nothing left to revoke and answered the CRL unchanged:
// a pinned key stayed trusted, and any key could join again.
func TestKeyCompromiseOfAKeyWhoseCertificatesAreRevoked(t *testing.T) {
	for _, pinned := range []bool{false, true} {
		t.Run(map[bool]string{false: "enrolled", true: "pinned"}[pinned], func(t *testing.T) {
			priv := benchKey(2100)
			key := base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))
			var pins []string
			if pinned {
				pins = []string{key}
			}
			n := newNode(t, registry.Config{Network: "N", TrustedKeys: pins, SweepInterval: time.Hour, Logger: quiet})
			ctx := t.Context()
			if _, err := n.Enroll(ctx, key, nil, time.Hour); err != nil {
				t.Fatal(err)
			}
			if _, err := n.Revoke(ctx, "", key, registry.ReasonCessation); err != nil {
				t.Fatal(err)
			}
			seq := n.Certificates(key)
			res, err := n.Revoke(ctx, "", key, registry.ReasonKeyCompromise)
			if err != nil {
				t.Fatal(err)
			}
			if res.CRLSequence != 2 {
				t.Errorf("the compromise answered CRL sequence %d, want 2 (a new CRL)", res.CRLSequence)
			}
			var re *registry.Error
			if _, err := n.Enroll(ctx, key, nil, time.Hour); !errors.As(err, &re) || re.Code != "node_key_compromised" {
				t.Errorf("enrolment of the compromised key: %v, want node_key_compromised", err)
			}
			_, err = n.Register(ctx, signed(t, priv, "N", []string{"x"}, time.Now(), time.Hour))
			if !errors.As(err, &re) || re.Code != descriptor.CodeKeyRevoked {
				t.Errorf("registration of the compromised key: %v, want %s", err, descriptor.CodeKeyRevoked)
			}
			if got := n.Certificates(key); len(got) < len(seq) {
				t.Errorf("%d certificates after the compromise, want at least %d", len(got), len(seq))
			}
		})
	}
}

// TestKeyCompromiseByIDOfARevokedCertificate: an operator revokes, by its
// id, a certificate already revoked for cessation, now for
// key_compromise, while the key holds another valid certificate. The key
// must be blocked: before, the answer was the CRL unchanged (as for any
// certificate revoked twice) and the other certificate kept the key
// trusted. A second key_compromise changes nothing.
func TestKeyCompromiseByIDOfARevokedCertificate(t *testing.T) {
	priv := benchKey(2101)
	key := base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))
	n := newNode(t, registry.Config{Network: "N", SweepInterval: time.Hour, Logger: quiet})
	ctx := t.Context()
	first, err := n.Enroll(ctx, key, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Enroll(ctx, key, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Revoke(ctx, first.CertID, "", registry.ReasonCessation); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Register(ctx, signed(t, priv, "N", []string{"x"}, time.Now(), time.Hour)); err != nil {
		t.Fatalf("the key's other certificate: %v", err)
	}
	res, err := n.Revoke(ctx, first.CertID, "", registry.ReasonKeyCompromise)
	if err != nil {
		t.Fatal(err)
	}
	if res.CRLSequence != 2 || len(res.Evicted) != 1 {
		t.Errorf("the compromise answered %+v, want CRL sequence 2 and the key evicted", res)
	}
	var re *registry.Error
	if _, err := n.Enroll(ctx, key, nil, time.Hour); !errors.As(err, &re) || re.Code != "node_key_compromised" {
		t.Errorf("enrolment of the compromised key: %v, want node_key_compromised", err)
	}
	_, err = n.Register(ctx, signed(t, priv, "N", []string{"x"}, time.Now().Add(time.Second), time.Hour))
	if !errors.As(err, &re) || re.Code != descriptor.CodeKeyRevoked {
		t.Errorf("registration of the compromised key: %v, want %s", err, descriptor.CodeKeyRevoked)
	}
	if again, err := n.Revoke(ctx, first.CertID, "", registry.ReasonKeyCompromise); err != nil || again.CRLSequence != 2 {
		t.Errorf("a second key_compromise: %+v, %v; want the CRL unchanged (sequence 2)", again, err)
	}
}
