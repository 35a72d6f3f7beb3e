package identity

import "errors"

// Error is a verification or key-parsing failure. Each one is a distinct
// value usable with errors.Is, and also matches its class: errors.Is(err,
// ErrInvalidSignature) is true for every signature failure, errors.Is(err,
// ErrInvalidPublicKey) for every public-key failure.
type Error struct {
	msg   string
	class error
}

// Error returns the message prefixed with "identity: ".
func (e *Error) Error() string { return "identity: " + e.msg }

// Is reports whether target is e's class.
func (e *Error) Is(target error) bool { return target == e.class }

// The two classes.
var (
	ErrInvalidPublicKey = errors.New("identity: invalid public key")
	ErrInvalidSignature = errors.New("identity: invalid signature")
)

// Public-key failures (class ErrInvalidPublicKey).
var (
	ErrPublicKeyLength = &Error{"public key is not 32 bytes", ErrInvalidPublicKey}
	// ErrNonCanonicalPublicKey: the encoded y-coordinate is not reduced
	// modulo p (y >= 2^255-19), so one key would have two encodings.
	ErrNonCanonicalPublicKey = &Error{"public key encoding is not canonical (y >= p)", ErrInvalidPublicKey}
	// ErrSmallOrderPublicKey: the key is one of the 8 points of order 1, 2,
	// 4 or 8. With such a key some signatures verify for every message;
	// Go's crypto/ed25519 accepts them, libsodium does not.
	ErrSmallOrderPublicKey = &Error{"public key has small order (a weak key that validates forged signatures)", ErrInvalidPublicKey}
	ErrPublicKeyNotOnCurve = &Error{"public key is not a point on the curve", ErrInvalidPublicKey}
)

// Signature failures (class ErrInvalidSignature).
var (
	ErrSignatureLength = &Error{"signature is not 64 bytes", ErrInvalidSignature}
	// ErrNonCanonicalSignature: S is not below the group order L, which
	// would make signatures malleable.
	ErrNonCanonicalSignature = &Error{"signature is not canonical (S >= L)", ErrInvalidSignature}
	// ErrSmallOrderR: the signature's R is a point of small order.
	ErrSmallOrderR = &Error{"signature R has small order", ErrInvalidSignature}
	// ErrSignatureMismatch: well-formed, but not a signature of this
	// message by this key.
	ErrSignatureMismatch = &Error{"signature does not match the message and public key", ErrInvalidSignature}
)
