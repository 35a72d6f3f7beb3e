package state

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry/descriptor"
)

func newState(t *testing.T, now time.Time) *State {
	t.Helper()
	s := New(func() time.Time { return now }, time.Minute, 2)
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	_, root, _ := ed25519.GenerateKey(rand.Reader)
	s.SetTrust(NewAuthority("net", "na", key, root, nil))
	return s
}

// A shared store's transaction is delivered whole: trimming the watch
// history never splits the events of one revision.
func TestEventsTrimKeepsRevisionTogether(t *testing.T) {
	now := time.Now()
	s := newState(t, now)
	s.Record([]Event{{Kind: EventRegistered, Key: "a"}}, 1, now)
	s.Record([]Event{{Kind: EventRegistered, Key: "b"}, {Kind: EventRegistered, Key: "c"}}, 2, now)
	s.Record([]Event{{Kind: EventRegistered, Key: "d"}}, 3, now)
	// Four events, twice the history of 2: trimming to the newest two
	// would keep "c" without "b"; it drops revision 2 whole instead.
	if got := s.FirstEvent(); got != 3 {
		t.Fatalf("after trimming, the oldest event is of revision %d, want 3", got)
	}
	if evs := s.Events(0, 3, nil); len(evs) != 1 || evs[0].Key != "d" {
		t.Fatalf("events after trimming: %+v, want only d", evs)
	}
	if s.Version != 3 {
		t.Fatalf("version %d, want 3", s.Version)
	}
}

// Revoking a certificate changes the cached verdict of its key's entry
// at once; a key_compromise of a key without certificates is recorded as
// a pseudo-certificate and blocks the key.
func TestRevocationRefreshesVerdicts(t *testing.T) {
	now := time.Now()
	s := newState(t, now)
	a := s.Trust
	cs := a.Issue("key1", []string{"role:client"}, now, time.Hour, 1)
	a.AddCert(cs)
	e := &Registration{Entry: Entry{Key: "key1", Capabilities: []string{"c"}, Source: SourceDescriptor, RegisteredAt: now, ExpiresAt: now.Add(time.Hour)}}
	s.Index(e)
	if v := s.Verdict(e, now); !v.Trusted {
		t.Fatalf("enrolled key not trusted: %s", v.Reason)
	}
	crl := a.NewCRL(0, nil, now)
	r := a.Revoke(crl, a.ByKey["key1"], "key1", ReasonKeyCompromise, now)
	if r.Empty() || len(r.Revoked) != 1 || r.Blocked != nil {
		t.Fatalf("revocation %+v: want one certificate revoked, no pseudo-certificate", r)
	}
	a.ApplyRevocation(r)
	if v := s.Verdict(e, now); v.Trusted || v.Reason != ReasonCompromised {
		t.Fatalf("after key_compromise the verdict is %+v", v)
	}
	if again := a.Revoke(crl, a.ByKey["key1"], "key1", ReasonKeyCompromise, now); !again.Empty() {
		t.Fatalf("revoking again changes %+v", again)
	}
	pinned := a.Revoke(crl, nil, "key2", ReasonKeyCompromise, now)
	if pinned.Blocked == nil || pinned.Blocked.Parsed.CertID != "pinned:key2" {
		t.Fatalf("a compromise of a key without certificates: %+v", pinned)
	}
	a.ApplyRevocation(pinned)
	if v := a.Verdict("key2", now); v.Trusted {
		t.Fatal("a compromised pinned key is trusted")
	}
	if _, err := descriptor.ParseJoinCertificate(pinned.Blocked.Cert); err != nil {
		t.Fatalf("the pseudo-certificate's stored form does not parse: %v", err)
	}
}
