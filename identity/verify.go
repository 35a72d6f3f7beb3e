package identity

import (
	"crypto/ed25519"

	"filippo.io/edwards25519"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// smallOrderY lists the y-coordinates (little-endian, sign bit clear) of the
// points of order 1, 2, 4 and 8, including the non-canonical encodings y = p
// and y = p+1 of 0 and 1 — the same list libsodium checks. A point has small
// order iff its encoding, sign bit ignored, is one of these.
var smallOrderY = [7][32]byte{
	// 0 (order 4)
	{},
	// 1 (order 1, the identity)
	{0x01},
	// order 8
	{0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98, 0xf0,
		0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53, 0xfc, 0x05},
	// order 8
	{0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10, 0x67, 0x0f,
		0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac, 0x03, 0x7a},
	// p-1 (order 2)
	{0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
	// p, non-canonical 0 (order 4)
	{0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
	// p+1, non-canonical 1 (order 1)
	{0xee, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
}

// hasSmallOrder reports whether the point encoded in b (32 bytes) is one of
// the small-order points, in any of its encodings.
func hasSmallOrder(b []byte) bool {
	var y [32]byte
	copy(y[:], b)
	y[31] &= 0x7f
	for i := range smallOrderY {
		if y == smallOrderY[i] {
			return true
		}
	}
	return false
}

// isCanonicalY reports whether the y-coordinate encoded in b (32 bytes, sign
// bit ignored) is below p = 2^255-19.
func isCanonicalY(b []byte) bool {
	if b[31]&0x7f != 0x7f {
		return true
	}
	for i := 30; i > 0; i-- {
		if b[i] != 0xff {
			return true
		}
	}
	return b[0] < 0xed
}

// checkPublicKey applies libsodium's checks to an encoded public key.
func checkPublicKey(b []byte) error {
	switch {
	case len(b) != ed25519.PublicKeySize:
		return ErrPublicKeyLength
	case !isCanonicalY(b):
		return ErrNonCanonicalPublicKey
	case hasSmallOrder(b):
		return ErrSmallOrderPublicKey
	}
	if _, err := new(edwards25519.Point).SetBytes(b); err != nil {
		return ErrPublicKeyNotOnCurve
	}
	return nil
}

// verify is strict Ed25519 verification (RFC 8032, cofactorless, as
// libsodium's crypto_sign_verify_detached): the signature must be 64 bytes
// with S < L and R not of small order, the key canonical and not of small
// order, and R = [S]B - [k]A with R compared byte for byte (so a
// non-canonical R never verifies).
//
// The equation is checked by curve25519-voi with the standard library's
// semantics (stdlibSemantics) rather than by crypto/ed25519: the same
// answer for every input (TestVerifierMatchesStdlib, FuzzVerify), in a
// little over half the CPU, which a node admitting signed registrations
// spends on every one of them (docs/BENCHMARKS.md, "Registry on etcd").
func verify(pub []byte, msg, sig []byte) error {
	if len(sig) != ed25519.SignatureSize {
		return ErrSignatureLength
	}
	if _, err := new(edwards25519.Scalar).SetCanonicalBytes(sig[32:]); err != nil {
		return ErrNonCanonicalSignature
	}
	if hasSmallOrder(sig[:32]) {
		return ErrSmallOrderR
	}
	if len(pub) != ed25519.PublicKeySize {
		return ErrPublicKeyLength
	}
	if !isCanonicalY(pub) {
		return ErrNonCanonicalPublicKey
	}
	if hasSmallOrder(pub) {
		return ErrSmallOrderPublicKey
	}
	if voi.VerifyWithOptions(voi.PublicKey(pub), msg, sig, stdlibSemantics) {
		return nil
	}
	if _, err := new(edwards25519.Point).SetBytes(pub); err != nil {
		return ErrPublicKeyNotOnCurve
	}
	return ErrSignatureMismatch
}

// stdlibSemantics makes voi decide exactly as crypto/ed25519.Verify does
// (cofactorless, R compared as encoded); the stricter checks are verify's
// own, before it.
var stdlibSemantics = &voi.Options{Verify: voi.VerifyOptionsStdLib}
