package merkle

import "errors"

// Errors. Every error the package returns matches exactly one of these with
// errors.Is; the message says what failed.
var (
	// ErrMalformed: JSON or hex that is not the strict form json.go
	// documents (unknown, duplicate or missing field, bad hex, a size past
	// 2^53-1, trailing data, a path longer than MaxPathLen, ...).
	ErrMalformed = errors.New("merkle: malformed")
	// ErrOutOfRange: a tree size past the tree's size, a leaf index not
	// below its tree size, or a first size past the second.
	ErrOutOfRange = errors.New("merkle: out of range")
	// ErrInvalidProof: a proof that does not verify against the hashes and
	// sizes it was checked with, or does not belong to the heads given.
	ErrInvalidProof = errors.New("merkle: proof does not verify")
	// ErrInvalidHead: a signed tree head whose signature does not verify
	// or whose key_id is not the verifying key's.
	ErrInvalidHead = errors.New("merkle: tree head does not verify")
)
