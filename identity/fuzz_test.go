package identity

import (
	"bytes"
	"crypto/ed25519"
	"testing"

	"filippo.io/edwards25519"
)

// FuzzDecode: no input makes Decode panic; what decodes re-encodes to bytes
// that decode to the same value, and strict base64 accepts only its own
// canonical output.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"aGk=", "aGk", "aGl=", "-_8", "0xABcd", "é", "", "aG\nk="} {
		for e := range uint8(5) {
			f.Add(s, e)
		}
	}
	f.Fuzz(func(t *testing.T, s string, e uint8) {
		enc := Encoding(e % 6)
		b, err := Decode(s, enc)
		if err != nil {
			return
		}
		if enc == Base64 && Encode(b, Base64) != s {
			t.Fatalf("strict base64 accepted %q, which is not the canonical %q", s, Encode(b, Base64))
		}
		if enc == None {
			return
		}
		back, err := Decode(Encode(b, enc), enc)
		if err != nil || !bytes.Equal(back, b) {
			t.Fatalf("%v: %q → %x → %q → %x, %v", enc, s, b, Encode(b, enc), back, err)
		}
		if _, _, err := DecodeAny(s, 32); err != nil {
			return
		}
	})
}

// FuzzVerify: no key or signature makes verification panic, and strict
// verification never accepts what crypto/ed25519 rejects; past its own
// stricter checks it decides as crypto/ed25519 does.
func FuzzVerify(f *testing.F) {
	k, _ := NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	msg := []byte("message")
	f.Add(k.Public().Bytes(), msg, k.Sign(msg))
	f.Add(make([]byte, 32), msg, make([]byte, 64))
	f.Add(append([]byte{1}, make([]byte, 31)...), msg, append(append([]byte{1}, make([]byte, 31)...), make([]byte, 32)...))
	f.Fuzz(func(t *testing.T, pub, msg, sig []byte) {
		err := VerifyWith(pub, msg, sig)
		if _, perr := ParsePublicKey(pub); perr == nil && err == nil {
			if len(pub) != 32 || len(sig) != 64 || !ed25519.Verify(pub, msg, sig) {
				t.Fatal("strict verification accepted what crypto/ed25519 rejects")
			}
		}
		if err == nil && len(sig) == 64 && hasSmallOrder(pub) {
			t.Fatal("accepted a small-order key")
		}
		// Past the stricter checks, the answer is crypto/ed25519's.
		if checkPublicKey(pub) == nil && len(sig) == 64 && !hasSmallOrder(sig[:32]) {
			if _, serr := new(edwards25519.Scalar).SetCanonicalBytes(sig[32:]); serr == nil && (err == nil) != ed25519.Verify(pub, msg, sig) {
				t.Fatalf("verify says %v, crypto/ed25519 the opposite", err)
			}
		}
	})
}
