package fingerprint

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/capmesh/capmesh/canonical"
)

// EmptyHash is the fingerprint of a value JSON.stringify turns into
// undefined (a top-level undefined, function or symbol): the SHA-256 of the
// empty string, because TextEncoder encodes undefined as "".
const EmptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// HashPlainObject is the reference's hashPlainObject: the lowercase hex
// SHA-256 of Canonical(v). Markers (see the package documentation) stand
// for JavaScript values JSON cannot carry.
func HashPlainObject(v canonical.Value) (string, error) {
	buf := getBuf()
	defer putBuf(buf)
	b, ok, err := appendPlain((*buf)[:0], v)
	*buf = b
	if err != nil {
		return "", err
	}
	if !ok {
		return EmptyHash, nil
	}
	return hexSum(b), nil
}

// Canonical returns the exact string hashPlainObject hashes for v:
// JSON.stringify(sortValue(v)). defined is false when JSON.stringify would
// return undefined (v is undefined, a function or a symbol), in which case
// the hash is EmptyHash.
func Canonical(v canonical.Value) (out []byte, defined bool, err error) {
	out, defined, err = appendPlain(nil, v)
	if err != nil || !defined {
		return nil, false, err
	}
	return out, true, nil
}

// appendPlain appends Canonical(v) to dst. Plain JSON is encoded in one
// pass: the encoder stops at the first marker object, and only then is v
// resolved (plain) and encoded again.
func appendPlain(dst []byte, v canonical.Value) (out []byte, defined bool, err error) {
	out, stopped, err := canonical.AppendKhoralabsUntil(dst, &v, isMarkerKey)
	if err != nil || !stopped {
		return out, err == nil, err
	}
	p, ok, err := plain(v, 0)
	if err != nil || !ok {
		return dst, false, err
	}
	out, err = canonical.Khoralabs.AppendCanonical(dst, p)
	return out, err == nil, err
}

// Plain returns v with its markers resolved as hashPlainObject resolves
// them, ready for the khoralabs profile; ok is false when v vanishes.
func Plain(v canonical.Value) (canonical.Value, bool, error) { return plain(v, 0) }

// isMarkerKey reports whether k is the key of a marker object.
func isMarkerKey(k string) bool {
	switch k {
	case markUndefined, markFunction, markSymbol, markDate, markNumber, markBigInt, markAncestor, markLiteral:
		return true
	}
	return false
}

// bufPool holds the buffers payloads are written into to be hashed.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) <= 64<<10 { // do not keep a huge document's buffer
		bufPool.Put(b)
	}
}

// hashPayload is the fingerprint of a pre-hash payload built without
// error: the lowercase hex SHA-256 of its khoralabs form. kind and name
// name the declaration in an encoding error (invalid UTF-8 in a
// hand-built value); a payload's own error is returned as it is.
func hashPayload(kind, name string, p canonical.Value, err error) (string, error) {
	if err != nil {
		return "", err
	}
	buf := getBuf()
	defer putBuf(buf)
	b, _, err := canonical.AppendKhoralabsUntil((*buf)[:0], &p, nil)
	*buf = b
	if err != nil {
		if kind != "" {
			return "", fmt.Errorf("%s %q: %w", kind, name, err)
		}
		return "", err
	}
	return hexSum(b), nil
}

// hexSum is the lowercase hex SHA-256 of b.
func hexSum(b []byte) string {
	sum := sha256.Sum256(b)
	var text [2 * sha256.Size]byte
	hex.Encode(text[:], sum[:])
	return string(text[:])
}
