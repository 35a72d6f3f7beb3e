package mandates

import (
	"crypto/ed25519"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/capmesh/capmesh/chp"
)

// mandateClock is the time the statements are signed at.
var mandateClock = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func seedKey(seed byte) ed25519.PrivateKey {
	s := make([]byte, ed25519.SeedSize)
	s[0] = seed
	return ed25519.NewKeyFromSeed(s)
}

func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// TestRevocationsBounded: past MaxRevocations a new statement is refused
// (ErrTooManyRevocations) and not kept; one already held is still accepted.
func TestRevocationsBounded(t *testing.T) {
	b, err := Open(Config{})
	if err != nil {
		t.Fatal(err)
	}
	key := seedKey(1)
	first, _ := chp.SignMandateRevocation("p", "mnd_first", rfc(mandateClock), "", key)
	if _, err := b.AcceptRevocation(first); err != nil {
		t.Fatal(err)
	}
	// Fill the rest of the set directly: signing 65535 statements would
	// only slow the test.
	b.mu.Lock()
	for i := len(b.revoked); i < MaxRevocations; i++ {
		b.add(mandateKey{id: "mnd_" + strconv.Itoa(i), principalKey: "k"}, []byte("{}"))
	}
	b.mu.Unlock()
	next, _ := chp.SignMandateRevocation("p", "mnd_next", rfc(mandateClock), "", key)
	if _, err := b.AcceptRevocation(next); !errors.Is(err, ErrTooManyRevocations) {
		t.Fatalf("over the bound: %v", err)
	}
	if n := len(b.Revocations().Mandates); n != MaxRevocations {
		t.Fatalf("%d held", n)
	}
	if _, err := b.AcceptRevocation(first); err != nil {
		t.Fatalf("a statement already held: %v", err)
	}
}
