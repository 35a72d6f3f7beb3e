package identity

import (
	"crypto/ed25519"
	"testing"
)

func TestEd25519AccessorMatchesKey(t *testing.T) {
	k, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	sk := k.Ed25519()
	msg := []byte("capmesh")
	if !ed25519.Verify(sk.Public().(ed25519.PublicKey), msg, ed25519.Sign(sk, msg)) {
		t.Fatal("standard-library key does not sign")
	}
	if got, want := []byte(sk.Public().(ed25519.PublicKey)), k.Public().Bytes(); string(got) != string(want) {
		t.Fatalf("public keys differ: %x vs %x", got, want)
	}
	if err := k.Public().Verify(msg, ed25519.Sign(sk, msg)); err != nil {
		t.Fatalf("identity rejects a signature by its own key: %v", err)
	}
}
