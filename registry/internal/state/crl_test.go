package state

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"
	"time"
)

// TestCRLPrunedOnlyOnASharedStore: a new CRL leaves out a certificate
// revoked for cessation and expired for more than CRLGrace only with
// PruneCRL (a shared store, whose CRL record must fit one write); a
// node's own store keeps the reference's CRL that only grows, and an
// expired certificate revoked for key_compromise stays listed on both.
func TestCRLPrunedOnlyOnASharedStore(t *testing.T) {
	for _, prune := range []bool{false, true} {
		_, key, _ := ed25519.GenerateKey(rand.Reader)
		_, root, _ := ed25519.GenerateKey(rand.Reader)
		a := NewAuthority("net", "na", key, root, nil)
		a.PruneCRL = prune
		now := time.Now()
		past := now.Add(-72 * time.Hour)
		ceased := a.Issue("key-ceased", []string{"role:client"}, past, time.Hour, 1)
		compromised := a.Issue("key-compromised", []string{"role:client"}, past, time.Hour, 1)
		live := a.Issue("key-live", []string{"role:client"}, now, time.Hour, 1)
		for _, cs := range []*CertState{ceased, compromised, live} {
			a.AddCert(cs)
		}
		crl := a.NewCRL(0, nil, past)
		for _, step := range []struct {
			cs     *CertState
			reason string
		}{{ceased, "cessation_of_operation"}, {compromised, ReasonKeyCompromise}, {live, "superseded"}} {
			r := a.Revoke(crl, []*CertState{step.cs}, step.cs.Parsed.NodePublicKey, step.reason, now)
			a.ApplyRevocation(r)
			crl = a.NewCRL(crl.Sequence+1, r.Revoked, now)
		}
		listed := map[string]bool{}
		for _, rc := range crl.Revoked {
			listed[rc.CertificateID] = true
		}
		want := map[string]bool{ceased.Parsed.CertID: !prune, compromised.Parsed.CertID: true, live.Parsed.CertID: true}
		for id, w := range want {
			if listed[id] != w {
				t.Errorf("PruneCRL %v: certificate %s listed %v, want %v", prune, id, listed[id], w)
			}
		}
		if a.Certs[ceased.Parsed.CertID].Status != "revoked" {
			t.Errorf("PruneCRL %v: the pruned certificate's own record is %s, want revoked", prune, a.Certs[ceased.Parsed.CertID].Status)
		}
	}
}
