package state

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/capmesh/capmesh/internal/errcatalog"
	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/internal/refusal"
	"github.com/capmesh/capmesh/registry/store"
)

// The registry's checks that need only its state: a descriptor's trust
// and anti-rollback, a node's renewal and heartbeat, a revocation's
// targets, and the bounds of what operators pass in. They read the state
// (either lock; package registry holds the writer lock, as the change
// that follows needs it) and answer with the registry's refusals
// (registry/internal/refusal), word for word what clients always got.

// Revocation reasons accepted by the reference NA, beside
// ReasonKeyCompromise.
const (
	ReasonCessation   = "cessation_of_operation"
	ReasonSuperseded  = "superseded"
	ReasonUnspecified = "unspecified"
)

// Admit checks a verified descriptor d (raw its wire form) against trust
// and the anti-rollback watermark at now, and returns the entry, the
// writes (the descriptor stamped with machine, then its watermark, kept
// skew past the newest expiry) and the event that admit it — or the
// current entry as same when it is the same descriptor again
// (idempotent).
func (s *State) Admit(d *descriptor.Descriptor, raw []byte, now time.Time, machine string, skew time.Duration) (e *Registration, ops []store.Op, ev Event, same *Registration, err error) {
	if v := s.Trust.Verdict(d.NodePublicKey, now); !v.Trusted {
		word := descriptor.CodeNoActiveCertificate
		if v.Reason == ReasonCompromised {
			word = descriptor.CodeKeyRevoked
		}
		return nil, nil, Event{}, nil, refusal.New(word, "node %s is not trusted: %s", Short(d.NodePublicKey), v.Reason)
	}
	reg := d.RegisteredAt.Instant()
	if mark, ok := s.Marks[d.NodePublicKey]; ok {
		cur, _ := s.Lookup(d.NodePublicKey)
		switch {
		case reg.Before(mark):
			return nil, nil, Event{}, nil, refusal.New(descriptor.CodeRollback, "descriptor registered_at %s is older than the newest accepted one (%s); refusing the rollback", d.RegisteredAt, mark.Format(time.RFC3339Nano))
		case reg.Equal(mark):
			if cur != nil && string(cur.Raw) == string(raw) {
				return nil, nil, Event{}, cur, nil // the same descriptor again: idempotent
			}
			return nil, nil, Event{}, nil, refusal.New(refusal.Replay, "a descriptor with registered_at %s was already accepted for this node; sign a new one", d.RegisteredAt)
		}
	}
	e = FromDescriptor(d, raw)
	markExp := d.ExpiresAt.Instant()
	if old, ok := s.Marks[d.NodePublicKey]; ok && old.After(markExp) {
		markExp = old
	}
	markVal, _ := json.Marshal(reg)
	ops = []store.Op{
		{Record: store.Record{Kind: KindDescriptor, Key: e.Key, Value: raw, ExpiresAt: e.ExpiresAt, Machine: Stamp(e, machine)}},
		{Record: store.Record{Kind: KindMark, Key: e.Key, Value: markVal, ExpiresAt: markExp.Add(skew)}},
	}
	kind := EventRegistered
	if cur, ok := s.Lookup(e.Key); ok && s.Live(cur, now) {
		kind = EventReplaced
	}
	return e, ops, EventOf(kind, e), nil, nil
}

// Fits checks that d is for network and, when maxTTL is positive, that
// its window is no longer than maxTTL.
func Fits(d *descriptor.Descriptor, network string, maxTTL time.Duration) error {
	if d.NetworkName != network {
		e := refusal.New(descriptor.CodeNetworkMismatch, "descriptor network_name %q does not match this registry's network", d.NetworkName)
		e.Details = map[string]any{"expected": network}
		return e
	}
	if maxTTL > 0 && d.ExpiresAt.Instant().Sub(d.RegisteredAt.Instant()) > maxTTL {
		return refusal.New(descriptor.CodeInvalid, "descriptor window exceeds this registry's maximum TTL of %s", maxTTL)
	}
	return nil
}

// Short abbreviates a node key for a message.
func Short(key string) string {
	if len(key) > 12 {
		return key[:12] + "…"
	}
	return key
}

// forbidden is a 403 refusal of a node's certificate request.
func forbidden(word, format string, args ...any) error {
	return refusal.WithStatus(word, 403, errcatalog.Forbidden, format, args...)
}

// Renewal checks a renewal of certID for nodeKey at now: the certificate
// must be known, the node's, unrevoked and unexpired, and roles (when not
// nil) the same set as its own. It returns the certificate and the most
// hours a renewal may last (its invite's, 168 when it has none).
func (t *Authority) Renewal(certID, nodeKey string, roles []string, now time.Time) (*CertState, int, error) {
	cs, ok := t.Certs[certID]
	switch {
	case !ok:
		return nil, 0, forbidden("certificate_not_found", "unknown certificate; cannot renew")
	case cs.Parsed.NodePublicKey != nodeKey:
		return nil, 0, forbidden("certificate_key_mismatch", "public key does not match certificate")
	case cs.Status == "revoked":
		return nil, 0, forbidden("certificate_revoked", "certificate revoked")
	case !now.Before(cs.Parsed.ExpiresAt.Instant()):
		return nil, 0, forbidden("certificate_expired", "certificate expired; re-enrollment required")
	}
	if roles != nil && !sameSet(roles, cs.Parsed.Roles) {
		return nil, 0, forbidden("renewal_role_change_forbidden", "role changes are not permitted during renewal")
	}
	maxH := cs.MaxValidityHours
	if maxH <= 0 {
		maxH = 168
	}
	return cs, maxH, nil
}

// sameSet reports whether a and b hold the same strings, counting repeats.
func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// HeartbeatCert checks that certID is a known, unrevoked certificate of
// nodeKey, for a node's heartbeat.
func (t *Authority) HeartbeatCert(certID, nodeKey string) error {
	cs, ok := t.Certs[certID]
	if !ok || cs.Parsed.NodePublicKey != nodeKey {
		return forbidden("certificate_not_found", "unknown certificate")
	}
	if cs.Status == "revoked" {
		return forbidden("certificate_revoked", "certificate revoked")
	}
	return nil
}

// MayIssue refuses a certificate for a key blocked by key_compromise.
func (t *Authority) MayIssue(nodeKey string) error {
	if t.Compromised[nodeKey] {
		return forbidden("node_key_compromised", "node public key has been revoked for key_compromise")
	}
	return nil
}

// RevocationReason is reason checked, ReasonUnspecified when empty.
func RevocationReason(reason string) (string, error) {
	if reason == "" {
		reason = ReasonUnspecified
	}
	switch reason {
	case ReasonKeyCompromise, ReasonCessation, ReasonSuperseded, ReasonUnspecified:
		return reason, nil
	}
	return "", refusal.WithStatus("invalid_revocation_reason", 400, 0-32602, "invalid revocation reason %q", reason)
}

// RevocationTargets selects what a revocation for reason revokes: the
// certificate certID (then nodeKey is its key), or else every unrevoked
// certificate of nodeKey. It returns the targets and the node key; no
// targets with a key_compromise still blocks the key.
func (t *Authority) RevocationTargets(certID, nodeKey, reason string) ([]*CertState, string, error) {
	switch {
	case certID != "":
		cs, ok := t.Certs[certID]
		if !ok {
			return nil, "", refusal.WithStatus("certificate_not_found", 404, errcatalog.NotFound, "unknown certificate %q", certID)
		}
		if cs.Status == "revoked" && reason == ReasonKeyCompromise {
			return nil, cs.Parsed.NodePublicKey, nil // revoked already: the key_compromise still blocks the key
		}
		return []*CertState{cs}, cs.Parsed.NodePublicKey, nil
	case nodeKey != "":
		if len(t.ByKey[nodeKey]) == 0 && reason != ReasonKeyCompromise {
			return nil, "", refusal.WithStatus("certificate_not_found", 404, errcatalog.NotFound, "node key %s holds no certificate", Short(nodeKey))
		}
		return t.Unrevoked(nodeKey), nodeKey, nil // none left: a key_compromise still blocks the key
	}
	return nil, "", refusal.New(refusal.InvalidParams, "cert_id or node_public_key required")
}

// CheckHours refuses a duration given to the Go API that is negative or
// longer than max hours; zero means the default.
func CheckHours(name string, d time.Duration, max int64) error {
	if d < 0 || d > time.Duration(max)*time.Hour {
		return refusal.New(refusal.InvalidParams, "%s must be between 1 and %d hours, not %s", name, max, d)
	}
	return nil
}

// Roles is the roles a certificate or invite grants: roles, or
// role:client when none, each one the authority issues.
func Roles(roles []string) ([]string, error) {
	if len(roles) == 0 {
		roles = []string{"role:client"}
	}
	if err := ValidRoles(roles); err != nil {
		return nil, refusal.New(refusal.InvalidParams, "%v", err)
	}
	return roles, nil
}
