package mandates

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/capmesh/capmesh/chp"
)

// ErrBadRevocation wraps every reason AcceptRevocation refuses a statement:
// it is malformed or does not verify. Nothing refused is stored.
var ErrBadRevocation = errors.New("mandates: invalid mandate revocation")

// ErrTooManyRevocations is AcceptRevocation's answer once the host holds
// MaxRevocations statements (a peer's) or MaxRevocations +
// OperatorRevocationReserve (the operator's): a new one is not kept. A held
// revocation is never dropped to make room.
var ErrTooManyRevocations = errors.New("mandates: the host holds as many mandate revocations as it keeps")

// ErrNotIssuer is AcceptRevocation's answer to a peer's statement that does
// not revoke a mandate this host has seen issued under the statement's key
// (chp-v0.2.md §10, the issuer-only rule): only the issuer of a mandate the
// host knows, or its operator, may add to the held set. Nothing is kept.
var ErrNotIssuer = errors.New("mandates: not_issuer: the statement does not revoke a mandate this host has seen issued under its key")

// ErrIssuerQuota is AcceptRevocation's answer to a peer once the
// statement's principal key has MaxRevocationsPerIssuer revocations held.
var ErrIssuerQuota = errors.New("mandates: issuer_quota_exceeded: the host holds as many revocations under this principal key as it keeps")

// The bounds of the held revocation set (docs/limits.md).
const (
	// MaxRevocations bounds the mandate revocations a host holds from
	// peers (memory and sidecar file alike).
	MaxRevocations = 1 << 16
	// OperatorRevocationReserve is how many more the host's operator may
	// add past MaxRevocations: a full set never locks the operator out.
	OperatorRevocationReserve = 1 << 12
	// MaxRevocationsPerIssuer bounds the revocations a peer may add under
	// one principal key.
	MaxRevocationsPerIssuer = 1 << 10
	// MaxRevocationBytes bounds one mandate-revocation statement as
	// posted (400 invalid_revocation past it).
	MaxRevocationBytes = 16 << 10
	// maxKnownMandates bounds the mandates remembered as seen at gate 5
	// (expired ones are swept first; past it a mandate is not remembered,
	// and only the operator may revoke it here). With Config.UsesFile they
	// survive a restart: a new one is a line of that file.
	maxKnownMandates = 1 << 16
)

// RevocationSet is the revocation set a host holds (GET /revocations): key
// revocations (chp-v0.2.md §3.2; capmesh holds none) and the mandate
// revocations it accepted, as they were received.
type RevocationSet struct {
	Keys     []json.RawMessage `json:"keys"`
	Mandates []json.RawMessage `json:"mandates"`
}

// AcceptedRevocation is what AcceptRevocation answers.
type AcceptedRevocation struct {
	Accepted  bool   `json:"accepted"`
	MandateID string `json:"mandate_id"`
	Principal string `json:"principal"`
}

// AcceptRevocation verifies a mandate-revocation statement (at most
// MaxRevocationBytes; signature under its principal's key, that key's
// attestation) and, when it verifies and its poster may add it, keeps it —
// in the sidecar file when Config.RevocationsFile is set, never in the
// evidence store. From then on gate 5 refuses, as mandate_invalid, the
// mandate of that id issued under that key, and any chain through it.
// The operator (byOperator) may add any verified statement; a peer only
// one revoking a mandate this host has seen at gate 5 under the
// statement's key (ErrNotIssuer), within MaxRevocationsPerIssuer per key
// (ErrIssuerQuota) and MaxRevocations in all (ErrTooManyRevocations).
// Accepting the same statement twice keeps one; a held one is never
// dropped.
func (ms *State) AcceptRevocation(raw []byte, byOperator bool) (*AcceptedRevocation, error) {
	if len(raw) > MaxRevocationBytes {
		return nil, fmt.Errorf("%w: the statement is %d bytes, over the %d the host keeps", ErrBadRevocation, len(raw), MaxRevocationBytes)
	}
	s, err := chp.ParseMandateRevocation(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRevocation, err)
	}
	if err := chp.VerifyMandateRevocation(s); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRevocation, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRevocation, err)
	}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	k := mandateKey{s.MandateID, s.Principal.PublicKey}
	if _, dup := ms.revoked[k]; !dup {
		if err := ms.mayAdd(k, byOperator); err != nil {
			return nil, err
		}
		if ms.path != "" {
			if err := appendLine(ms.path, compact.Bytes(), ms.torn); err != nil {
				return nil, fmt.Errorf("mandates: keeping the revocation: %w", err)
			}
			ms.torn = false
		}
		ms.add(k, compact.Bytes())
		ms.log.Info("mandate revoked", "mandate_id", s.MandateID, "principal", s.Principal.HostID, "by_operator", byOperator)
	}
	return &AcceptedRevocation{Accepted: true, MandateID: s.MandateID, Principal: s.Principal.HostID}, nil
}

// mayAdd says whether the revocation of k may join the held set (ms.mu
// held).
func (ms *State) mayAdd(k mandateKey, byOperator bool) error {
	if byOperator {
		if len(ms.revoked) >= MaxRevocations+OperatorRevocationReserve {
			return ErrTooManyRevocations
		}
		return nil
	}
	if _, seen := ms.known[k]; !seen {
		return ErrNotIssuer
	}
	if ms.perKey[k.principalKey] >= MaxRevocationsPerIssuer {
		return ErrIssuerQuota
	}
	if len(ms.revoked) >= MaxRevocations {
		return ErrTooManyRevocations
	}
	return nil
}

// remember records that the mandate k, valid until until, was presented
// and verified at gate 5: its issuer may revoke it here (ms.mu held). It
// reports whether k is newly remembered.
func (ms *State) remember(k mandateKey, until, now time.Time) bool {
	if _, ok := ms.known[k]; ok {
		return false
	}
	if ms.known == nil {
		ms.known = make(map[mandateKey]time.Time)
	}
	if len(ms.known) >= maxKnownMandates {
		for o, u := range ms.known {
			if now.After(u) {
				delete(ms.known, o)
			}
		}
		if len(ms.known) >= maxKnownMandates {
			return false
		}
	}
	ms.known[k] = until
	return true
}

// Revocations returns the revocation set the host holds.
func (ms *State) Revocations() RevocationSet {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	set := RevocationSet{Keys: []json.RawMessage{}, Mandates: make([]json.RawMessage, len(ms.served))}
	for i, s := range ms.served {
		set.Mandates[i] = json.RawMessage(s)
	}
	return set
}

// add records a verified statement (ms.mu held).
func (ms *State) add(k mandateKey, stmt []byte) {
	if ms.revoked == nil {
		ms.revoked = make(map[mandateKey]struct{})
	}
	if ms.perKey == nil {
		ms.perKey = make(map[string]int)
	}
	ms.revoked[k] = struct{}{}
	ms.perKey[k.principalKey]++
	ms.served = append(ms.served, stmt)
}

// loadRevocations reads the sidecar file at path (one statement a line),
// verifying each statement again; a line that does not verify — a torn last
// write, an edit — is skipped with a warning, never trusted.
func (ms *State) loadRevocations(path string) error {
	ms.path = path
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	// A torn last write leaves no newline: the next line must not join it.
	ms.torn = len(data) > 0 && data[len(data)-1] != '\n'
	for n, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		s, err := chp.ParseMandateRevocation(line)
		if err == nil {
			err = chp.VerifyMandateRevocation(s)
		}
		if err != nil {
			ms.log.Warn("skipping a mandate revocation that does not verify", "file", path, "line", n+1, "err", err)
			continue
		}
		k := mandateKey{s.MandateID, s.Principal.PublicKey}
		if _, dup := ms.revoked[k]; !dup {
			if len(ms.revoked) >= MaxRevocations+OperatorRevocationReserve {
				ms.log.Warn("the sidecar holds more mandate revocations than the host keeps; the rest are ignored", "file", path, "line", n+1)
				break
			}
			ms.add(k, bytes.Clone(line))
		}
	}
	return nil
}

// appendLine appends line and a newline to the file at path — after a
// newline first when the file ends torn — and syncs it.
func appendLine(path string, line []byte, torn bool) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	var buf []byte
	if torn {
		buf = append(buf, '\n')
	}
	buf = append(append(buf, line...), '\n')
	if _, err = f.Write(buf); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// RevocationIDs returns the identifiers of the held revocation set, sorted:
// "m\x00{mandate_id}\x00{principal public key}" per mandate revocation
// (chp-v0.2.md §12, proposal 0010; capmesh holds no key revocations).
func (ms *State) RevocationIDs() []string {
	ms.mu.Lock()
	ids := make([]string, 0, len(ms.revoked))
	for k := range ms.revoked {
		ids = append(ids, "m\x00"+k.id+"\x00"+k.principalKey)
	}
	ms.mu.Unlock()
	slices.Sort(ids)
	return ids
}

// RevocationHead is the chp-revocation-head-v1 digest of the held set:
// SHA-256 (hex) over the sorted identifiers, each ended by a newline. The
// empty set has the digest of no bytes.
func (ms *State) RevocationHead() string {
	h := sha256.New()
	for _, id := range ms.RevocationIDs() {
		h.Write([]byte(id + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))
}
