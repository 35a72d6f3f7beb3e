package btsp

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
)

// Protocol constants of the handshake.
const (
	// ProtocolName is the "protocol" member of a ClientHello.
	ProtocolName = "btsp"
	// Version is the handshake version capmesh speaks.
	Version = 1
	// WireVersion is the BTSP version named in transport_security and in
	// the rejection frame (the Capability Wire Standard's value).
	WireVersion = "2.0"

	handshakeSalt = "btsp-v1"
	handshakeInfo = "handshake"
	sessionInfo   = "btsp-session-v1"
	keySize       = 32
)

// ErrNoSeed is returned when a Config carries no family seed.
var ErrNoSeed = errors.New("btsp: no family seed (FAMILY_SEED) configured")

// seedKeys returns the handshake keys a family seed may stand for. The
// ecoPrimals documents disagree on whether HKDF is fed the seed's text as
// given or its base64 decoding: the first key is always the text's, and
// when the text is valid standard base64 the decoding's key follows. A
// client uses the first; a server accepts either (strict in what we emit,
// lenient in what we accept).
func seedKeys(seed string) ([][]byte, error) {
	if seed == "" {
		return nil, ErrNoSeed
	}
	keys := [][]byte{handshakeKey([]byte(seed))}
	if raw, err := base64.StdEncoding.DecodeString(seed); err == nil && len(raw) > 0 && string(raw) != seed {
		keys = append(keys, handshakeKey(raw))
	}
	return keys, nil
}

// handshakeKey is HKDF-SHA256(ikm = seed, salt = "btsp-v1", info = "handshake").
func handshakeKey(seed []byte) []byte {
	k, err := hkdf.Key(sha256.New, seed, []byte(handshakeSalt), handshakeInfo, keySize)
	if err != nil { // only for lengths HKDF cannot produce; 32 always works
		panic(fmt.Sprintf("btsp: hkdf: %v", err))
	}
	return k
}

// challengeMAC is HMAC-SHA256(hk, challenge ‖ client_pub ‖ server_pub).
func challengeMAC(hk, challenge, clientPub, serverPub []byte) []byte {
	m := hmac.New(sha256.New, hk)
	m.Write(challenge)
	m.Write(clientPub)
	m.Write(serverPub)
	return m.Sum(nil)
}

// sessionKeys derives the two directions' keys from the X25519 shared
// secret, salted with the handshake key so that only holders of the seed
// can compute them.
func sessionKeys(shared, hk []byte) (clientToServer, serverToClient []byte) {
	k, err := hkdf.Key(sha256.New, shared, hk, sessionInfo, 2*keySize)
	if err != nil {
		panic(fmt.Sprintf("btsp: hkdf: %v", err))
	}
	return k[:keySize], k[keySize:]
}
