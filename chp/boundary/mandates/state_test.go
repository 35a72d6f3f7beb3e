package mandates

import (
	"crypto/ed25519"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
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

// seen signs a revocation of id under key and, when presented, makes the
// mandate it revokes known to st as gate 5 does (Count).
func seen(t *testing.T, st *State, key ed25519.PrivateKey, id string, presented bool) []byte {
	t.Helper()
	raw, err := chp.SignMandateRevocation("p", id, rfc(mandateClock), "", key)
	if err != nil {
		t.Fatal(err)
	}
	if presented {
		r, err := chp.ParseMandateRevocation(raw)
		if err != nil {
			t.Fatal(err)
		}
		m := &chp.Mandate{MandateID: id, Principal: r.Principal, ValidUntil: mandateClock.Add(time.Hour)}
		if _, _, err := st.Count(m, "inv-"+id, mandateClock); err != nil {
			t.Fatal(err)
		}
	}
	return raw
}

// TestRevocationsBounded: a peer's new statement is refused past
// MaxRevocations (ErrTooManyRevocations) and not kept, the operator's past
// OperatorRevocationReserve more; one already held is still accepted, and
// none held is ever dropped.
func TestRevocationsBounded(t *testing.T) {
	b, err := Open(Config{})
	if err != nil {
		t.Fatal(err)
	}
	key := seedKey(1)
	first := seen(t, b, key, "mnd_first", true)
	if _, err := b.AcceptRevocation(first, false); err != nil {
		t.Fatal(err)
	}
	// Fill the rest of the set directly: signing 65535 statements would
	// only slow the test.
	fill := func(to int) {
		b.mu.Lock()
		for i := len(b.revoked); i < to; i++ {
			b.add(mandateKey{id: "mnd_" + strconv.Itoa(i), principalKey: "k" + strconv.Itoa(i%1000)}, []byte("{}"))
		}
		b.mu.Unlock()
	}
	fill(MaxRevocations)
	next := seen(t, b, key, "mnd_next", true)
	if _, err := b.AcceptRevocation(next, false); !errors.Is(err, ErrTooManyRevocations) {
		t.Fatalf("a peer's over the bound: %v", err)
	}
	if n := len(b.Revocations().Mandates); n != MaxRevocations {
		t.Fatalf("%d held", n)
	}
	if _, err := b.AcceptRevocation(next, true); err != nil {
		t.Fatalf("the operator's over the peers' bound: %v", err)
	}
	fill(MaxRevocations + OperatorRevocationReserve)
	last := seen(t, b, key, "mnd_last", false)
	if _, err := b.AcceptRevocation(last, true); !errors.Is(err, ErrTooManyRevocations) {
		t.Fatalf("the operator's over the reserve: %v", err)
	}
	for _, raw := range [][]byte{first, next} {
		if _, err := b.AcceptRevocation(raw, false); err != nil {
			t.Fatalf("a statement already held: %v", err)
		}
	}
	if !b.IsRevoked("mnd_first", mustPrincipalKey(t, first)) || len(b.Revocations().Mandates) != MaxRevocations+OperatorRevocationReserve {
		t.Fatal("a held revocation was dropped")
	}
}

func mustPrincipalKey(t *testing.T, raw []byte) string {
	t.Helper()
	r, err := chp.ParseMandateRevocation(raw)
	if err != nil {
		t.Fatal(err)
	}
	return r.Principal.PublicKey
}

// TestRevocationIssuerOnly: a peer may only add the revocation of a
// mandate presented here under the statement's key — one of a mandate
// never seen, or of a seen mandate id by another key (a non-issuer), is
// refused (ErrNotIssuer) and not kept — while the operator may add any
// verified one; a statement over MaxRevocationBytes is refused unparsed.
func TestRevocationIssuerOnly(t *testing.T) {
	st, err := Open(Config{})
	if err != nil {
		t.Fatal(err)
	}
	issuer, impostor := seedKey(1), seedKey(2)
	unseen := seen(t, st, issuer, "mnd_unseen", false)
	_ = seen(t, st, issuer, "mnd_x", true)
	forged := seen(t, st, impostor, "mnd_x", false)
	for name, raw := range map[string][]byte{"never presented": unseen, "non-issuer": forged} {
		if _, err := st.AcceptRevocation(raw, false); !errors.Is(err, ErrNotIssuer) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if n := len(st.Revocations().Mandates); n != 0 {
		t.Fatalf("refused statements kept: %d", n)
	}
	good := seen(t, st, issuer, "mnd_x", false)
	if _, err := st.AcceptRevocation(good, false); err != nil {
		t.Fatalf("the issuer's: %v", err)
	}
	if _, err := st.AcceptRevocation(unseen, true); err != nil {
		t.Fatalf("the operator's: %v", err)
	}
	if !st.IsRevoked("mnd_x", mustPrincipalKey(t, good)) || st.IsRevoked("mnd_x", mustPrincipalKey(t, forged)) {
		t.Fatal("the issuer-only rule does not hold")
	}
	big := append(append([]byte(nil), good[:len(good)-1]...), []byte(`,"pad":"`+strings.Repeat("x", MaxRevocationBytes)+`"}`)...)
	if _, err := st.AcceptRevocation(big, true); !errors.Is(err, ErrBadRevocation) {
		t.Fatalf("oversized: %v", err)
	}
}

// TestRevocationIssuerQuota: a peer may add at most
// MaxRevocationsPerIssuer revocations under one principal key
// (ErrIssuerQuota), while another key still gets in.
func TestRevocationIssuerQuota(t *testing.T) {
	st, err := Open(Config{})
	if err != nil {
		t.Fatal(err)
	}
	flood, other := seedKey(1), seedKey(2)
	first := seen(t, st, flood, "mnd_0", true)
	if _, err := st.AcceptRevocation(first, false); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	for i := 1; i < MaxRevocationsPerIssuer; i++ { // signing them all would only slow the test
		st.add(mandateKey{id: "mnd_" + strconv.Itoa(i), principalKey: mustPrincipalKey(t, first)}, []byte("{}"))
	}
	st.mu.Unlock()
	if _, err := st.AcceptRevocation(seen(t, st, flood, "mnd_more", true), false); !errors.Is(err, ErrIssuerQuota) {
		t.Fatalf("past the issuer's quota: %v", err)
	}
	if _, err := st.AcceptRevocation(seen(t, st, other, "mnd_more", true), false); err != nil {
		t.Fatalf("another issuer: %v", err)
	}
	if _, err := st.AcceptRevocation(first, false); err != nil {
		t.Fatalf("a held statement again: %v", err)
	}
}

// TestSeenMandatesSurviveRestart: with a uses file, the mandates seen at
// gate 5 — uncapped and capped — are remembered across a restart, so
// their issuer may still revoke them; an expired one is forgotten.
func TestSeenMandatesSurviveRestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "uses.jsonl")
	st, err := Open(Config{UsesFile: file, Now: mandateClock})
	if err != nil {
		t.Fatal(err)
	}
	key := seedKey(1)
	uncapped := seen(t, st, key, "mnd_uncapped", true)
	r, _ := chp.ParseMandateRevocation(uncapped)
	capped := &chp.Mandate{MandateID: "mnd_capped", Principal: r.Principal, ValidUntil: mandateClock.Add(time.Hour), MaxInvocations: 3}
	if _, _, err := st.Count(capped, "inv-1", mandateClock); err != nil {
		t.Fatal(err)
	}
	cappedRev := seen(t, st, key, "mnd_capped", false)
	again, err := Open(Config{UsesFile: file, Now: mandateClock})
	if err != nil {
		t.Fatal(err)
	}
	for name, raw := range map[string][]byte{"uncapped": uncapped, "capped": cappedRev} {
		if _, err := again.AcceptRevocation(raw, false); err != nil {
			t.Fatalf("%s after a restart: %v", name, err)
		}
	}
	later, err := Open(Config{UsesFile: file, Now: mandateClock.Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := later.AcceptRevocation(uncapped, false); !errors.Is(err, ErrNotIssuer) {
		t.Fatalf("an expired mandate is still remembered: %v", err)
	}
}
