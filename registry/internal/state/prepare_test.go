package state

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/store"
)

// descriptorChange is a store change carrying a signed descriptor of
// capability c.
func descriptorChange(t *testing.T, priv ed25519.PrivateKey, c string, rev uint64, at time.Time) store.Change {
	t.Helper()
	d := descriptor.New("agent", "net", priv.Public().(ed25519.PublicKey), []string{c},
		descriptor.Endpoint{Host: "10.0.0.1", Port: 7000, Scheme: "tcp"}, at, time.Hour)
	if err := d.Sign(priv); err != nil {
		t.Fatal(err)
	}
	raw, err := d.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var ch store.Change
	ch.Revision, ch.Kind, ch.Key, ch.Value, ch.ExpiresAt = rev, KindDescriptor, d.NodePublicKey, raw, at.Add(time.Hour)
	return ch
}

// TestPrepareParsesAheadOnlyWhatItNeeds: Prepare reads the registrations
// the state does not hold as they are (not this node's own writes coming
// back), ApplyChange applies what Prepare read exactly as it would have
// read it itself, and never a prepared registration of other bytes.
func TestPrepareParsesAheadOnlyWhatItNeeds(t *testing.T) {
	now := time.Now()
	s := newState(t, now)
	s.Follow("node-a")
	_, k1, _ := ed25519.GenerateKey(rand.Reader)
	_, k2, _ := ed25519.GenerateKey(rand.Reader)
	c1, c2 := descriptorChange(t, k1, "cap.one", 1, now), descriptorChange(t, k2, "cap.two", 1, now)

	s.Prepare([]store.Change{c1, c2})
	if len(s.Shared.parsed) != 2 {
		t.Fatalf("prepared %d registrations, want 2", len(s.Shared.parsed))
	}
	prepared := s.Shared.parsed[c1.Key]
	for _, ch := range []store.Change{c1, c2} {
		if _, ok, err := s.ApplyChange(ch, nil, now); !ok || err != nil {
			t.Fatalf("apply %s: %v, %v", ch.Key, ok, err)
		}
	}
	if got := s.entries[c1.Key]; got != prepared {
		t.Fatal("ApplyChange parsed again what Prepare had read")
	}
	if got := s.Providers("cap.two"); got != 1 {
		t.Fatalf("cap.two has %d providers, want 1", got)
	}

	// The same bytes back from the feed (this node's own write): nothing
	// to read ahead.
	s.Prepare([]store.Change{c1})
	if len(s.Shared.parsed) != 0 {
		t.Fatalf("prepared %d registrations for a change the state holds", len(s.Shared.parsed))
	}

	// Prepared from other bytes than the change applied: not used.
	_, k3, _ := ed25519.GenerateKey(rand.Reader)
	c3 := descriptorChange(t, k3, "cap.three", 2, now)
	other, err := s.FromChange(c2)
	if err != nil {
		t.Fatal(err)
	}
	s.Shared.parsed[c3.Key] = other
	if _, ok, err := s.ApplyChange(c3, nil, now); !ok || err != nil {
		t.Fatalf("apply: %v, %v", ok, err)
	}
	if got := s.entries[c3.Key]; got == nil || string(got.Raw) != string(c3.Value) || s.Providers("cap.three") != 1 {
		t.Fatalf("a registration prepared from other bytes was applied: %+v", got)
	}
}
