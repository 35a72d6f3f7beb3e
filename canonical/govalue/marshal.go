package govalue

import (
	"encoding/hex"
	"encoding/json"

	"github.com/capmesh/capmesh/canonical"
)

// Marshal returns the canonical form under p of v, which may be a
// canonical.Value, a *canonical.Value, a json.RawMessage (parsed as JSON
// text), or any Go value FromGo accepts.
func Marshal(p canonical.Profile, v any) ([]byte, error) {
	tv, err := toValue(v)
	if err != nil {
		return nil, err
	}
	out, err := p.AppendCanonical(nil, tv)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SHA256 returns the SHA-256 digest of the canonical form under p of v
// (anything Marshal accepts).
func SHA256(p canonical.Profile, v any) ([32]byte, error) {
	tv, err := toValue(v)
	if err != nil {
		return [32]byte{}, err
	}
	return canonical.HashValue(p, tv)
}

// SHA256Hex is SHA256 as lowercase hex, the form CHP content hashes,
// payload commitments and root hashes take.
func SHA256Hex(p canonical.Profile, v any) (string, error) {
	sum, err := SHA256(p, v)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(sum[:]), nil
}

func toValue(v any) (canonical.Value, error) {
	switch t := v.(type) {
	case canonical.Value:
		return t, nil
	case *canonical.Value:
		if t == nil {
			return canonical.Value{Kind: canonical.Null}, nil
		}
		return *t, nil
	case json.RawMessage:
		return canonical.Parse(t)
	default:
		return FromGo(v)
	}
}
