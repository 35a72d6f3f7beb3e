package fingerprint

import (
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
	h := getHasher()
	defer putHasher(h)
	b, ok, err := h.plain(h.b, &v)
	h.b = b
	if err != nil {
		return "", err
	}
	if !ok {
		return EmptyHash, nil
	}
	return h.hexString(), nil
}

// Canonical returns the exact string hashPlainObject hashes for v:
// JSON.stringify(sortValue(v)). defined is false when JSON.stringify would
// return undefined (v is undefined, a function or a symbol), in which case
// the hash is EmptyHash.
func Canonical(v canonical.Value) (out []byte, defined bool, err error) {
	h := getHasher()
	defer putHasher(h)
	out, defined, err = h.plain(nil, &v)
	if err != nil || !defined {
		return nil, false, err
	}
	return out, true, nil
}

// Plain returns v with its markers resolved as hashPlainObject resolves
// them, ready for the khoralabs profile; ok is false when v vanishes.
func Plain(v canonical.Value) (canonical.Value, bool, error) { return plain(v, 0) }
