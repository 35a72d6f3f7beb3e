package merkle

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// HashSize is the size of every hash in the tree: SHA-256.
const HashSize = sha256.Size

// Hash is a leaf hash, an interior node hash or a root hash.
type Hash [HashSize]byte

// String is the lowercase hex form, as in the JSON form.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// ParseHash parses the lowercase hex form of a hash: exactly 64 characters
// 0-9a-f. Uppercase is refused so that a hash has one spelling.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if err := decodeLowerHex(h[:], s); err != nil {
		return Hash{}, fmt.Errorf("%w: hash: %w", ErrMalformed, err)
	}
	return h, nil
}

// Domain-separation prefixes of RFC 9162 §2.1.1: they keep a leaf from ever
// hashing like an interior node (the second-preimage defence).
const (
	leafPrefix = 0x00
	nodePrefix = 0x01
)

// LeafHash is MTH({d}) for one entry: SHA-256(0x00 ‖ data).
func LeafHash(data []byte) Hash {
	h := sha256.New()
	h.Write([]byte{leafPrefix})
	h.Write(data)
	var out Hash
	h.Sum(out[:0])
	return out
}

// NodeHash is an interior node: SHA-256(0x01 ‖ left ‖ right).
func NodeHash(left, right Hash) Hash {
	var buf [1 + 2*HashSize]byte
	buf[0] = nodePrefix
	copy(buf[1:], left[:])
	copy(buf[1+HashSize:], right[:])
	return sha256.Sum256(buf[:])
}

// EmptyRoot is the root of the empty tree: SHA-256 of the empty string.
func EmptyRoot() Hash { return sha256.Sum256(nil) }

// decodeLowerHex decodes s into dst, which it must fill exactly, accepting
// only lowercase hex digits.
func decodeLowerHex(dst []byte, s string) error {
	if len(s) != 2*len(dst) {
		return fmt.Errorf("want %d lowercase hex digits, have %d characters", 2*len(dst), len(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("character %d (%q) is not a lowercase hex digit", i, c)
		}
	}
	_, err := hex.Decode(dst, []byte(s))
	return err
}
