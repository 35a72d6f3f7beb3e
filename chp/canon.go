package chp

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/capmesh/capmesh/canonical"
)

// Canonical forms. Every byte capmesh hashes or signs for CHP comes from
// package canonical, the project's one canonicalizer:
//
//   - canonical.ChpStableV1 — chp-stable-v1 (chp-v0.2.md §2) for everything
//     capmesh produces: payload commitments, host attestations, bundle
//     headers. Non-integer numbers are an error (rule 6).
//   - canonical.PythonSortKeys — what the Python reference actually computes
//     (floats written as Python's repr), used only to check foreign content
//     that may carry floats: a peer's event payloads and subjects.
//   - canonical.ChpJcsV1 — chp-jcs-v1 bundle headers.
//
// The evidence sealer (seal.go) writes its fixed-shape objects itself, for
// speed, and uses the helpers below for strings; tests check every byte it
// writes against the generic profile.

// appendStableString appends s as a chp-stable-v1 JSON string. Printable
// ASCII without '"' or '\' — every id, hash and timestamp capmesh writes — is
// copied as is (every profile writes it so); anything else goes through
// canonical.ChpStableV1. Invalid UTF-8 (possible only in a Go string that did
// not come from JSON) is written as U+FFFD, so the stored event and its hash
// agree with what any verifier decodes.
func appendStableString(dst []byte, s string) []byte {
	if !isPlainASCII(s) {
		return appendStableStringSlow(dst, s)
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// isPlainASCII reports whether every byte of s is printable ASCII other
// than '"' and '\\' (plainASCII), eight bytes at a time.
func isPlainASCII(s string) bool {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	// zero is non-zero exactly when x has a zero byte.
	zero := func(x uint64) uint64 { return (x - ones) &^ x & highs }
	i := 0
	for ; i+8 <= len(s); i += 8 {
		v := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		bad := v & highs                    // >= 0x80
		bad |= (v - ones*0x20) &^ v & highs // < 0x20 (a borrow only follows a flagged byte)
		bad |= (v + ones) &^ v & highs      // 0x7f (a carry only follows a flagged 0xff)
		bad |= zero(v^(ones*'"')) | zero(v^(ones*'\\'))
		if bad != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if !plainASCII[s[i]] {
			return false
		}
	}
	return true
}

// plainASCII marks the bytes every profile writes unescaped inside a string.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func appendStableStringSlow(dst []byte, s string) []byte {
	out, err := canonical.ChpStableV1.AppendCanonical(dst, canonical.Value{Kind: canonical.String, Str: s})
	if err != nil {
		out, _ = canonical.ChpStableV1.AppendCanonical(dst, canonical.Value{Kind: canonical.String, Str: strings.ToValidUTF8(s, "\uFFFD")})
	}
	return out
}

// compactStable appends src, a chp-stable-v1 text (or a fragment of one that
// starts outside a string), without the spaces of its ", " and ": "
// separators: the compact form capmesh stores. Inside strings nothing
// changes; chp-stable-v1 strings hold no raw control characters, so a space
// outside a string is always a separator's.
func compactStable(dst, src []byte) []byte {
	in := false
	start := 0
	for i := 0; i < len(src); i++ {
		switch c := src[i]; {
		case in:
			if c == '\\' {
				i++ // the escaped character never ends the string
			} else if c == '"' {
				in = false
			}
		case c == '"':
			in = true
		case c == ' ':
			dst = append(dst, src[start:i]...)
			start = i + 1
		}
	}
	return append(dst, src[start:]...)
}

// sha256Hex returns the lowercase hex SHA-256 of b.
func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// hashValue returns the lowercase hex SHA-256 of v's canonical form under p.
func hashValue(p canonical.Profile, v canonical.Value) (string, error) {
	sum, err := canonical.HashValue(p, v)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(sum[:]), nil
}

var nullValue = canonical.Value{Kind: canonical.Null}

func stringValue(s string) canonical.Value { return canonical.Value{Kind: canonical.String, Str: s} }

// member returns an object's member, Null when absent (or v not an object).
func member(v canonical.Value, key string) canonical.Value {
	m, ok := v.Get(key)
	if !ok {
		return nullValue
	}
	return m
}
