package identity

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"slices"
	"testing"
	"time"

	"filippo.io/edwards25519"
)

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRFC8032 replays RFC 8032 §7.1 tests 1-3.
func TestRFC8032(t *testing.T) {
	for _, tc := range []struct{ seed, pub, msg, sig string }{
		{"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60", "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
			"e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"},
		{"4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb", "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
			"92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
		{"c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7", "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
			"6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"},
	} {
		k, err := NewKeyFromSeed(mustHex(t, tc.seed))
		if err != nil {
			t.Fatal(err)
		}
		if got := k.Public().Hex(); got != tc.pub {
			t.Errorf("public key %s, want %s", got, tc.pub)
		}
		msg := mustHex(t, tc.msg)
		if got := hex.EncodeToString(k.Sign(msg)); got != tc.sig {
			t.Errorf("signature %s, want %s", got, tc.sig)
		}
		pub, err := ParsePublicKey(mustHex(t, tc.pub))
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.Verify(msg, mustHex(t, tc.sig)); err != nil {
			t.Errorf("Verify: %v", err)
		}
		bad := append(slices.Clone(msg), 0)
		if err := pub.Verify(bad, mustHex(t, tc.sig)); !errors.Is(err, ErrSignatureMismatch) {
			t.Errorf("Verify of another message: %v, want ErrSignatureMismatch", err)
		}
	}
}

// torsionPoints computes the 8 points of small order from first principles:
// the multiples of a point of order 8.
func torsionPoints(t *testing.T) [][]byte {
	t.Helper()
	p8, err := new(edwards25519.Point).SetBytes(mustHex(t, "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	q := edwards25519.NewIdentityPoint()
	for i := range 8 {
		out = append(out, q.Bytes())
		q = new(edwards25519.Point).Add(q, p8)
		if i < 7 && q.Equal(edwards25519.NewIdentityPoint()) == 1 {
			t.Fatalf("point has order %d, not 8", i+1)
		}
	}
	if q.Equal(edwards25519.NewIdentityPoint()) != 1 {
		t.Fatal("8·P8 is not the identity")
	}
	return out
}

func isSmallOrderByCofactor(t *testing.T, b []byte) bool {
	t.Helper()
	p, err := new(edwards25519.Point).SetBytes(b)
	if err != nil {
		return false
	}
	return new(edwards25519.Point).MultByCofactor(p).Equal(edwards25519.NewIdentityPoint()) == 1
}

// TestSmallOrderKeysRejected: all 8 small-order points, in every encoding,
// are rejected as keys, and the byte blocklist agrees with multiplying by
// the cofactor.
func TestSmallOrderKeysRejected(t *testing.T) {
	points := torsionPoints(t)
	want := []string{ // the 8 canonical encodings
		"0100000000000000000000000000000000000000000000000000000000000000", // identity
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // order 2
		"0000000000000000000000000000000000000000000000000000000000000000", // order 4
		"0000000000000000000000000000000000000000000000000000000000000080", // order 4
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05", // order 8
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
		"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
		"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
	}
	var got []string
	for _, p := range points {
		got = append(got, hex.EncodeToString(p))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("torsion points:\n got %v\nwant %v", got, want)
	}
	// Every encoding: the canonical ones, with the sign bit flipped, and the
	// non-canonical y = p, p+1.
	var encodings [][]byte
	for _, p := range points {
		encodings = append(encodings, p)
		flipped := slices.Clone(p)
		flipped[31] ^= 0x80
		encodings = append(encodings, flipped)
	}
	encodings = append(encodings,
		mustHex(t, "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"),
		mustHex(t, "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"),
		mustHex(t, "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"),
		mustHex(t, "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"))
	msg := []byte("any message at all")
	for _, b := range encodings {
		if !hasSmallOrder(b) {
			t.Errorf("%x: not in the blocklist", b)
		}
		if isCanonicalY(b) && !isSmallOrderByCofactor(t, b) {
			t.Errorf("%x: blocklisted but 8·P is not the identity", b)
		}
		if _, err := ParsePublicKey(b); !errors.Is(err, ErrSmallOrderPublicKey) && !errors.Is(err, ErrNonCanonicalPublicKey) {
			t.Errorf("ParsePublicKey(%x) = %v, want a small-order or non-canonical error", b, err)
		}
		if err := VerifyWith(b, msg, make([]byte, 64)); !errors.Is(err, ErrInvalidSignature) && !errors.Is(err, ErrInvalidPublicKey) {
			t.Errorf("VerifyWith(%x) = %v", b, err)
		}
	}
	// Ordinary keys are not blocklisted.
	for i := range 64 {
		k, _ := NewKeyFromSeed(slices.Repeat([]byte{byte(i)}, 32))
		if hasSmallOrder(k.pub.b[:]) || isSmallOrderByCofactor(t, k.pub.b[:]) {
			t.Errorf("key %d reported small order", i)
		}
	}
}

// TestIdentityKeyForgery pins why strict verification exists: with the
// identity point as public key, R = [s]B and S = s verify for every message
// under Go's crypto/ed25519. PublicKey.Verify refuses.
func TestIdentityKeyForgery(t *testing.T) {
	identity := mustHex(t, "0100000000000000000000000000000000000000000000000000000000000000")
	s, err := new(edwards25519.Scalar).SetCanonicalBytes(append([]byte{7}, make([]byte, 31)...))
	if err != nil {
		t.Fatal(err)
	}
	forged := append(new(edwards25519.Point).ScalarBaseMult(s).Bytes(), s.Bytes()...)
	for _, msg := range []string{"pay mallory", "revoke nothing", ""} {
		if !ed25519.Verify(identity, []byte(msg), forged) {
			t.Fatal("crypto/ed25519 no longer accepts the forgery; revisit the decision record")
		}
		if err := VerifyWith(identity, []byte(msg), forged); !errors.Is(err, ErrSmallOrderPublicKey) {
			t.Errorf("VerifyWith(identity key) = %v, want ErrSmallOrderPublicKey", err)
		}
	}
	// The RFC-005 notes' example: identity key, R = identity, S = 0.
	if err := VerifyWith(identity, []byte("x"), append(slices.Clone(identity), make([]byte, 32)...)); !errors.Is(err, ErrSmallOrderR) {
		t.Errorf("R=identity, S=0: %v, want ErrSmallOrderR", err)
	}
}

func TestNonCanonicalEncodings(t *testing.T) {
	k, _ := NewKeyFromSeed(mustHex(t, "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"))
	msg := []byte("hello")
	sig := k.Sign(msg)
	pub := k.Public()

	// S + L: same signature mathematically, malleated encoding.
	l := mustHex(t, "edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010")
	var carry uint16
	malleated := slices.Clone(sig)
	for i := range 32 {
		sum := uint16(malleated[32+i]) + uint16(l[i]) + carry
		malleated[32+i] = byte(sum)
		carry = sum >> 8
	}
	if carry != 0 {
		t.Fatal("S + L overflowed 32 bytes")
	}
	if err := pub.Verify(msg, malleated); !errors.Is(err, ErrNonCanonicalSignature) {
		t.Errorf("S+L: %v, want ErrNonCanonicalSignature", err)
	}
	// S with the top bits set.
	high := slices.Clone(sig)
	high[63] |= 0xe0
	if err := pub.Verify(msg, high); !errors.Is(err, ErrNonCanonicalSignature) {
		t.Errorf("high S: %v, want ErrNonCanonicalSignature", err)
	}
	// Public keys with y >= p, whether or not they decode to a point.
	for i := range 19 {
		b := mustHex(t, "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f")
		b[0] += byte(i)
		for _, sign := range []byte{0, 0x80} {
			b[31] = 0x7f | sign
			if _, err := ParsePublicKey(b); !errors.Is(err, ErrNonCanonicalPublicKey) && !errors.Is(err, ErrSmallOrderPublicKey) {
				t.Errorf("y = p+%d: %v, want ErrNonCanonicalPublicKey", i, err)
			}
			if err := VerifyWith(b, msg, sig); !errors.Is(err, ErrInvalidPublicKey) {
				t.Errorf("VerifyWith(y = p+%d): %v", i, err)
			}
		}
	}
	// A non-canonical R never verifies (R is compared byte for byte).
	badR := slices.Clone(sig)
	copy(badR, mustHex(t, "f0ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"))
	if err := pub.Verify(msg, badR); !errors.Is(err, ErrInvalidSignature) {
		t.Errorf("non-canonical R: %v", err)
	}
	// A point off the curve.
	var off []byte
	for y := byte(2); ; y++ {
		b := append([]byte{y}, make([]byte, 31)...)
		if _, err := new(edwards25519.Point).SetBytes(b); err != nil {
			off = b
			break
		}
	}
	if _, err := ParsePublicKey(off); !errors.Is(err, ErrPublicKeyNotOnCurve) {
		t.Errorf("off-curve key %x: %v", off, err)
	}
	if err := VerifyWith(off, msg, sig); !errors.Is(err, ErrPublicKeyNotOnCurve) {
		t.Errorf("VerifyWith(off-curve): %v", err)
	}
	// A key with a torsion component (mixed order) is canonical and not
	// small order: libsodium accepts it, and so do we.
	p, _ := new(edwards25519.Point).SetBytes(pub.b[:])
	t8, _ := new(edwards25519.Point).SetBytes(mustHex(t, "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"))
	if _, err := ParsePublicKey(new(edwards25519.Point).Add(p, t8).Bytes()); err != nil {
		t.Errorf("mixed-order key: %v (libsodium accepts it)", err)
	}
}

func TestLengthsAndZeroKey(t *testing.T) {
	k, _ := Generate()
	msg := []byte("m")
	sig := k.Sign(msg)
	for _, n := range []int{0, 63, 65} {
		if err := k.Public().Verify(msg, make([]byte, n)); !errors.Is(err, ErrSignatureLength) {
			t.Errorf("%d-byte signature: %v", n, err)
		}
	}
	for _, n := range []int{0, 31, 33} {
		if _, err := ParsePublicKey(make([]byte, n)); !errors.Is(err, ErrPublicKeyLength) {
			t.Errorf("%d-byte key: %v", n, err)
		}
		if err := VerifyWith(make([]byte, n), msg, sig); !errors.Is(err, ErrPublicKeyLength) {
			t.Errorf("VerifyWith(%d-byte key): %v", n, err)
		}
	}
	var zero PublicKey
	if !zero.IsZero() || zero.Verify(msg, sig) == nil {
		t.Error("the zero PublicKey verified a signature")
	}
	if err := k.Public().Verify(msg, sig); err != nil {
		t.Error(err)
	}
	// Every failure matches its class and only its class.
	for _, e := range []error{ErrSignatureLength, ErrNonCanonicalSignature, ErrSmallOrderR, ErrSignatureMismatch} {
		if !errors.Is(e, ErrInvalidSignature) || errors.Is(e, ErrInvalidPublicKey) {
			t.Errorf("%v: wrong class", e)
		}
	}
	for _, e := range []error{ErrPublicKeyLength, ErrNonCanonicalPublicKey, ErrSmallOrderPublicKey, ErrPublicKeyNotOnCurve} {
		if !errors.Is(e, ErrInvalidPublicKey) || errors.Is(e, ErrInvalidSignature) {
			t.Errorf("%v: wrong class", e)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	k, _ := Generate()
	msg := make([]byte, 256)
	sig := k.Sign(msg)
	pub := k.Public()
	raw := pub.Bytes()
	b.Run("strict", func(b *testing.B) {
		for b.Loop() {
			if pub.Verify(msg, sig) != nil {
				b.Fatal("verify failed")
			}
		}
	})
	b.Run("stdlib", func(b *testing.B) {
		for b.Loop() {
			if !ed25519.Verify(raw, msg, sig) {
				b.Fatal("verify failed")
			}
		}
	})
	// Alternate both in each iteration so machine load hits them alike;
	// x_stdlib is strict time over crypto/ed25519 time.
	b.Run("paired", func(b *testing.B) {
		var std, strict time.Duration
		for b.Loop() {
			t0 := time.Now()
			ed25519.Verify(raw, msg, sig)
			t1 := time.Now()
			pub.Verify(msg, sig)
			strict += time.Since(t1)
			std += t1.Sub(t0)
		}
		b.ReportMetric(float64(strict)/float64(b.N), "strict_ns/op")
		b.ReportMetric(float64(std)/float64(b.N), "stdlib_ns/op")
		b.ReportMetric(float64(strict)/float64(std), "x_stdlib")
	})
}
