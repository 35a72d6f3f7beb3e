package state

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry/descriptor"
)

// TestLapsedReadsOnlyWhatIsDue: Lapsed returns the certificates whose
// records are due (not one revoked for key_compromise, not one
// forgotten, one added again after it was forgotten) and reads only the
// minutes of its index that are due, not every certificate: a sweep
// runs it every second under the writers' lock, and at 1 M agents (two
// million certificates) a scan of every certificate took 0.4 s, more
// than three times the rest of the sweep. The probe: certificates due
// later have their expiry moved to the past behind the index's back,
// which only a scan of every certificate sees. Before, Lapsed scanned
// every certificate and returned them too.
func TestLapsedReadsOnlyWhatIsDue(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	a := NewAuthority("net", "na", key, key, nil)
	now := time.Now()
	old := now.Add(-CertRetention - 2*time.Hour)
	var due []*CertState
	for i := range 5 {
		cs := a.Issue(fmt.Sprint("due-", i), []string{"role:client"}, old, time.Hour, 1)
		a.AddCert(cs)
		due = append(due, cs)
	}
	for i := range 1000 {
		cs := a.Issue(fmt.Sprint("later-", i), []string{"role:client"}, now, time.Hour, 1)
		a.AddCert(cs)
		cs.Parsed.ExpiresAt = descriptor.TimeOf(old) // the probe
	}
	compromised, forgotten := due[3], due[4]
	a.SetStatus(compromised, "revoked", ReasonKeyCompromise)
	a.Forget(forgotten.Parsed.CertID)

	ids := func(css ...*CertState) []string {
		var out []string
		for _, cs := range css {
			out = append(out, cs.Parsed.CertID)
		}
		slices.Sort(out)
		return out
	}
	check := func(when string, want []string) {
		t.Helper()
		got := a.Lapsed(now)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: Lapsed returned %d certificates, want %d: %v", when, len(got), len(want), want)
		}
		for _, id := range got {
			a.Forget(id)
		}
	}
	check("first sweep", ids(due[:3]...))
	check("second sweep", nil)
	a.AddCert(due[1]) // delivered again by the feed
	check("once added again", ids(due[1]))
	if len(a.Certs) != 1001 {
		t.Errorf("%d certificates held, want 1001 (the compromised one and the later ones)", len(a.Certs))
	}
}

// TestLapsedBoundsOneSweep: Lapsed returns at most MaxLapsed
// certificates, the rest at the next calls, so that a sweep holds the
// readers' lock (Find) for a bounded time however many certificates are
// due at once (records stored before they had an expiry, loaded at the
// upgrade; a clock that jumps). Before, one sweep forgot them all.
func TestLapsedBoundsOneSweep(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	a := NewAuthority("net", "na", key, key, nil)
	now := time.Now()
	const n = MaxLapsed + 5
	for i := range n {
		exp := now.Add(-CertRetention - time.Duration(i%3)*time.Minute)
		c := &descriptor.JoinCertificate{CertID: fmt.Sprint("c", i), NodePublicKey: fmt.Sprint("k", i), ExpiresAt: descriptor.TimeOf(exp)}
		a.AddCert(&CertState{Status: "issued", Parsed: c})
	}
	total := 0
	for _, want := range []int{MaxLapsed, 5, 0} {
		got := a.Lapsed(now)
		if len(got) != want {
			t.Errorf("after %d forgotten: Lapsed returned %d, want %d", total, len(got), want)
		}
		for _, id := range got {
			a.Forget(id)
		}
		total += len(got)
	}
	if len(a.Certs) != 0 {
		t.Errorf("%d certificates left, want none", len(a.Certs))
	}
}
