// Package govalue brings Go values to package canonical: FromGo turns any
// value encoding/json can write into a canonical.Value, exactly as
// canonical.Parse(json.Marshal(v)) would, and Marshal, SHA256 and
// SHA256Hex canonicalize and hash such a value under a canonical.Profile in
// one call.
//
//	Go value ──FromGo──▶ canonical.Value ──Profile.AppendCanonical──▶ bytes ──▶ SHA-256
//
// Maps, slices and scalars (what json.Unmarshal produces) are walked
// directly, without an encoding round trip; structs and types with their
// own MarshalJSON go through encoding/json. The canonical forms themselves
// live in package canonical; this package only converts.
package govalue
