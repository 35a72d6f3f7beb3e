package state

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// A local registration belongs to the node that admitted it, on that
// node's machine: only there may it be renewed, removed or taken over.
// On a shared store every node indexes the others' local registrations
// too, keyed "local:<name>@<node>" (FromChange); a process of another
// machine naming that key, or presenting the same process id, is not
// their registrant.

// NewToken returns a fresh random registration token (32 bytes,
// base64url).
func NewToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// TokenHash is the stored form of a token: its SHA-256, in hex.
func TokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// CheckLocalName refuses a local registration's name that is empty or
// holds '@': on a shared store "<name>@<node>" is how every node keys
// another node's registration of name, so such a name would stand for
// that registration.
func CheckLocalName(name string) error {
	if name == "" {
		return errors.New("primal_id (or name) is required")
	}
	if strings.ContainsRune(name, '@') {
		return fmt.Errorf("primal_id %q holds '@', which names another node's registration in a fleet", name)
	}
	return nil
}

// AdmittedHere reports whether e, a local registration in this node's
// index, was admitted by this node on its machine here: keyed by its own
// name (another node's is keyed "<name>@<node>") and recorded on this
// machine (MayReachHere). Only such a registration may be renewed,
// removed or taken over through the node, and only its endpoint may be
// dialled here to see whether it is gone.
func AdmittedHere(e Entry, here string, shared bool) bool {
	return e.Source == SourceLocal && e.Key == LocalKey(e.Name) && MayReachHere(e, here, shared)
}

// OwnedBy reports whether a caller is lr's registrant: by its token when
// it presents one (a wrong token is not made up for by the pid), else by
// its process id (pid, when hasCred: its SO_PEERCRED). A process id
// names a process of one machine: the caller must have checked that lr
// was admitted on the caller's machine (AdmittedHere).
func (lr *LocalRecord) OwnedBy(hasCred bool, pid int32, token string) bool {
	if token != "" {
		return lr.TokenHash != "" && subtle.ConstantTimeCompare([]byte(TokenHash(token)), []byte(lr.TokenHash)) == 1
	}
	return lr.PID != 0 && hasCred && pid == lr.PID
}
