package identity

import (
	"crypto/ed25519"
	"crypto/sha512"
	"math/rand/v2"
	"testing"

	"filippo.io/edwards25519"
)

// TestVerifierMatchesStdlib: verify decides as crypto/ed25519.Verify does
// on every input that passes its own stricter checks — including the
// signatures where the cofactored and cofactorless equations disagree:
// keys with a torsion component (A + T, T of order 8) sign so that
// [S]B - [k]A = R - [k]T, which is R only when 8 divides k. A cofactored
// verifier accepts all of them; crypto/ed25519 and verify accept only
// those.
func TestVerifierMatchesStdlib(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	scalar := func(b []byte) *edwards25519.Scalar {
		s, err := new(edwards25519.Scalar).SetUniformBytes(b)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	torsion, err := new(edwards25519.Point).SetBytes(smallOrderY[2][:])
	if err != nil {
		t.Fatal(err)
	}
	var accepted, refused, mixedAccepted, mixedRefused int
	for i := range 600 {
		a := scalar(random(64))
		pub := new(edwards25519.Point).ScalarBaseMult(a)
		mixed := i%2 == 0
		if mixed {
			pub.Add(pub, torsion)
		}
		pubB := pub.Bytes()
		msg := random(1 + rng.IntN(100))
		r := scalar(random(64))
		rB := new(edwards25519.Point).ScalarBaseMult(r).Bytes()
		h := sha512.New()
		h.Write(rB)
		h.Write(pubB)
		h.Write(msg)
		k := scalar(h.Sum(nil))
		s := new(edwards25519.Scalar).MultiplyAdd(k, a, r)
		sig := append(rB, s.Bytes()...)
		cases := [][3][]byte{{pubB, msg, sig}}
		// and a damaged message, signature and key
		m2 := append([]byte{}, msg...)
		m2[rng.IntN(len(m2))] ^= 1 << rng.IntN(8)
		s2 := append([]byte{}, sig...)
		s2[rng.IntN(32)] ^= 1 << rng.IntN(8)
		p2 := append([]byte{}, pubB...)
		p2[rng.IntN(31)] ^= 1 << rng.IntN(8)
		cases = append(cases, [3][]byte{pubB, m2, sig}, [3][]byte{pubB, msg, s2}, [3][]byte{p2, msg, sig})
		for j, c := range cases {
			want := ed25519.Verify(c[0], c[1], c[2])
			err := VerifyWith(c[0], c[1], c[2])
			if err != nil && !want {
				refused++
				if mixed && j == 0 {
					mixedRefused++
				}
				continue
			}
			if (err == nil) != want {
				if checkPublicKey(c[0]) != nil || hasSmallOrder(c[2][:32]) {
					continue // refused by the stricter checks, as intended
				}
				t.Fatalf("case %d.%d (mixed key %v): verify says %v, crypto/ed25519 says %v", i, j, mixed, err, want)
			}
			accepted++
			if mixed && j == 0 {
				mixedAccepted++
			}
		}
	}
	// Both outcomes occurred, on the keys where the equations differ too.
	if accepted == 0 || refused == 0 || mixedAccepted == 0 || mixedRefused == 0 {
		t.Fatalf("accepted %d, refused %d; mixed keys accepted %d, refused %d", accepted, refused, mixedAccepted, mixedRefused)
	}
}
