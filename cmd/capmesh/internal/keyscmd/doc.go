// Package keyscmd holds `capmesh keys` (the host's Ed25519 identity key:
// generate, show, sign, verify, export) and `capmesh descriptor` (verify
// and sign RFC-005 descriptors, by default with that key).
package keyscmd
