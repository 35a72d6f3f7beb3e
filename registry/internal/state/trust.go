package state

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/internal/pyjson"
	"github.com/capmesh/capmesh/registry/store"
)

// ReasonKeyCompromise is the revocation reason that blocks a node key for
// good.
const ReasonKeyCompromise = "key_compromise"

// ReasonCompromised is the verdict of a key revoked for key_compromise.
const ReasonCompromised = "node key revoked for key_compromise"

// CertState is a certificate with the authority's bookkeeping, as stored.
type CertState struct {
	Cert             json.RawMessage `json:"cert"`
	Status           string          `json:"status"` // "issued" | "revoked"
	RevocationReason string          `json:"revocation_reason,omitempty"`
	MaxValidityHours int             `json:"max_validity_hours"`
	// Parsed is Cert, parsed.
	Parsed *descriptor.JoinCertificate `json:"-"`
}

// ParseCertState reads a stored certificate.
func ParseCertState(value []byte) (*CertState, error) {
	var cs CertState
	if err := json.Unmarshal(value, &cs); err != nil {
		return nil, err
	}
	c, err := descriptor.ParseJoinCertificate(cs.Cert)
	if err != nil {
		return nil, err
	}
	cs.Parsed = c
	return &cs, nil
}

// CertificateStatus summarises one certificate for operators.
type CertificateStatus struct {
	CertID           string   `json:"cert_id"`
	NodePublicKey    string   `json:"node_public_key"`
	Roles            []string `json:"roles"`
	IssuedAt         string   `json:"issued_at"`
	ExpiresAt        string   `json:"expires_at"`
	Status           string   `json:"status"`
	RevocationReason string   `json:"revocation_reason,omitempty"`
}

// Authority is the network authority's state: its keys, the certificates
// it issued, the keys blocked by key_compromise, the CRL, and the signed
// documents it serves. Guarded as State is.
type Authority struct {
	Network     string
	KeyID       string
	Key         ed25519.PrivateKey      // signs certificates, CRLs and the policy
	Root        ed25519.PrivateKey      // signs the genesis block
	Pinned      map[string]bool         // node keys trusted without a certificate
	Certs       map[string]*CertState   // cert id →
	ByKey       map[string][]*CertState // node key →
	Compromised map[string]bool
	CRL         *descriptor.CRL
	Genesis     map[string]any
	Policy      map[string]any // signed PolicyManifest, created on first GET /policy
	// PruneCRL: new CRLs leave out certificates revoked, not for
	// key_compromise, and expired for more than CRLGrace (listed). Set on
	// a shared store, whose CRL record must stay within one write.
	PruneCRL bool
	// lapse orders the certificates by the expiry of their records, for
	// Lapsed (writers' state; entries forgotten or revoked for
	// key_compromise since are dropped when they come due).
	lapse lapseHeap
	// onChange is told the node key whenever the trust of that key may
	// have changed (a certificate issued or revoked, a compromise mark), so
	// that cached verdicts are refreshed (State.SetTrust sets it).
	onChange func(key string)
}

// NewPolicy is a new signed policy manifest of the network, issued at
// issuedAt (an RFC 3339 time as descriptors spell it). It restricts
// nothing: allowed_services is empty and allowed_ports the reference's
// default.
func (t *Authority) NewPolicy(issuedAt string) map[string]any {
	p := map[string]any{
		"policy_id":          "policy-" + t.Network + "-v1",
		"issued_at":          issuedAt,
		"issued_by":          t.KeyID,
		"min_client_version": "0.1.0",
		"allowed_ports":      []any{443, 8443},
		"allowed_services":   []any{},
		"routing":            map[string]any{"preferred_transports": []any{"quic", "wireguard"}, "max_hops": 6},
	}
	p["signatures"] = []any{SigObject(Sign(p, t.Key, t.KeyID))}
	return p
}

// NewAuthority is an authority of network without certificates, signing
// with key (named keyID) and root, trusting the pinned node keys.
func NewAuthority(network, keyID string, key, root ed25519.PrivateKey, pinned []string) *Authority {
	t := &Authority{Network: network, KeyID: keyID, Key: key, Root: root,
		Pinned: map[string]bool{}, Certs: map[string]*CertState{}, ByKey: map[string][]*CertState{}, Compromised: map[string]bool{}}
	for _, k := range pinned {
		t.Pinned[k] = true
	}
	return t
}

// Verdict: key_compromise blocks for good; otherwise an active (issued,
// not revoked, not expired) certificate or operator pinning trusts.
func (t *Authority) Verdict(key string, now time.Time) Verdict {
	v, _ := t.VerdictUntil(key, now)
	return v
}

// VerdictUntil is Verdict plus the instant from which it may change
// without any trust change (the expiry of the certificate it rests on);
// callers cache it until then or until the trust of the key changes.
func (t *Authority) VerdictUntil(key string, now time.Time) (Verdict, time.Time) {
	forever := now.Add(100 * 365 * 24 * time.Hour)
	if t.Compromised[key] {
		return Verdict{false, ReasonCompromised}, forever
	}
	var best *CertState
	for _, c := range t.ByKey[key] {
		if c.Status == "revoked" || !now.Before(c.Parsed.ExpiresAt.Instant()) {
			continue
		}
		if best == nil || c.Parsed.ExpiresAt.Instant().After(best.Parsed.ExpiresAt.Instant()) {
			best = c
		}
	}
	if best != nil {
		return Verdict{true, "enrolled: join certificate " + best.Parsed.CertID + " valid until " + best.Parsed.ExpiresAt.String()}, best.Parsed.ExpiresAt.Instant()
	}
	if t.Pinned[key] {
		return Verdict{true, "pinned by operator"}, forever
	}
	if len(t.ByKey[key]) > 0 {
		return Verdict{false, "no active join certificate (revoked or expired)"}, forever
	}
	return Verdict{false, "node key is not enrolled"}, forever
}

// Changed tells the index that the trust of key may have changed.
func (t *Authority) Changed(key string) {
	if t.onChange != nil {
		t.onChange(key)
	}
}

// AddCert adds a certificate (writer and readers' locks).
func (t *Authority) AddCert(cs *CertState) {
	t.Certs[cs.Parsed.CertID] = cs
	t.ByKey[cs.Parsed.NodePublicKey] = append(t.ByKey[cs.Parsed.NodePublicKey], cs)
	t.indexLapse(cs)
	if cs.Status == "revoked" && cs.RevocationReason == ReasonKeyCompromise {
		t.Compromised[cs.Parsed.NodePublicKey] = true
	}
	t.Changed(cs.Parsed.NodePublicKey)
}

// SetStatus records that cs was revoked (or reissued) for reason (writer
// and readers' locks).
func (t *Authority) SetStatus(cs *CertState, status, reason string) {
	cs.Status, cs.RevocationReason = status, reason
	if status == "revoked" && reason == ReasonKeyCompromise {
		t.Compromised[cs.Parsed.NodePublicKey] = true
	}
	t.Changed(cs.Parsed.NodePublicKey)
}

// ApplyCert applies a stored certificate written elsewhere (another node
// of a shared store): a new one is added, a known one takes its status.
func (t *Authority) ApplyCert(value []byte) {
	cs, err := ParseCertState(value)
	if err != nil {
		return
	}
	if cur, ok := t.Certs[cs.Parsed.CertID]; ok {
		t.SetStatus(cur, cs.Status, cs.RevocationReason)
		return
	}
	t.AddCert(cs)
}

// Sign signs obj (its genesis canonical JSON) with key, named keyID.
func Sign(obj map[string]any, key ed25519.PrivateKey, keyID string) descriptor.Signature {
	b, err := pyjson.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return descriptor.Signature{KeyID: keyID, Sig: base64.StdEncoding.EncodeToString(ed25519.Sign(key, b))}
}

// SigObject is s as a JSON object.
func SigObject(s descriptor.Signature) map[string]any {
	return map[string]any{"key_id": s.KeyID, "sig": s.Sig}
}

// GenesisBlock builds the signed genesis block served at /genesis: the
// network name, the root key and the authority key that signs join
// certificates and CRLs, signed by the root key.
func (t *Authority) GenesisBlock(now time.Time) map[string]any {
	year := now.UTC().Truncate(time.Hour)
	g := map[string]any{
		"network_name":    t.Network,
		"network_version": "v1",
		"root_public_key": base64.StdEncoding.EncodeToString(t.Root.Public().(ed25519.PublicKey)),
		"network_authority": map[string]any{
			"public_key": base64.StdEncoding.EncodeToString(t.Key.Public().(ed25519.PublicKey)),
			"valid_from": descriptor.TimeOf(year.Add(-24 * time.Hour)).String(),
			"valid_to":   descriptor.TimeOf(year.Add(10 * 365 * 24 * time.Hour)).String(),
		},
		"allowed_crypto_suites": []any{"ed25519", "x25519"},
		"allowed_transports":    []any{"quic", "wireguard"},
		"policy_manifest":       map[string]any{"hash": "sha256:none", "url": nil},
		"bootstrap_anchors":     []any{},
	}
	g["signatures"] = []any{SigObject(Sign(g, t.Root, "root"))}
	return g
}

// NewUUID is a random (version 4) UUID.
func NewUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Issue makes a signed join certificate for nodeKey, valid from now, and
// its stored form; nothing is recorded until AddCert.
func (t *Authority) Issue(nodeKey string, roles []string, now time.Time, validity time.Duration, maxHours int) *CertState {
	c := &descriptor.JoinCertificate{
		CertID: NewUUID(), NodePublicKey: nodeKey, NetworkName: t.Network, Roles: roles,
		IssuedAt: descriptor.TimeOf(now), ExpiresAt: descriptor.TimeOf(now.Add(validity)), IssuedBy: t.KeyID,
	}
	c.Signatures = []descriptor.Signature{Sign(c.Object(false), t.Key, t.KeyID)}
	raw, _ := c.MarshalJSON()
	return &CertState{Cert: raw, Status: "issued", MaxValidityHours: maxHours, Parsed: c}
}

// NewCRL makes a signed CRL of sequence seq listing revoked, issued now.
func (t *Authority) NewCRL(seq int64, revoked []descriptor.RevokedCertificate, now time.Time) *descriptor.CRL {
	c := &descriptor.CRL{CRLID: NewUUID(), Sequence: seq, IssuedAt: descriptor.TimeOf(now), NextUpdate: descriptor.TimeOf(now.Add(24 * time.Hour)),
		Issuer: t.KeyID, Revoked: revoked}
	c.Signatures = []descriptor.Signature{Sign(c.Object(false), t.Key, t.KeyID)}
	return c
}

// Certificates returns the certificates held by a node key (all when
// nodeKey is empty), oldest first.
func (t *Authority) Certificates(nodeKey string) []CertificateStatus {
	var out []CertificateStatus
	for _, cs := range t.Certs {
		c := cs.Parsed
		if nodeKey != "" && c.NodePublicKey != nodeKey {
			continue
		}
		out = append(out, CertificateStatus{CertID: c.CertID, NodePublicKey: c.NodePublicKey, Roles: c.Roles,
			IssuedAt: c.IssuedAt.String(), ExpiresAt: c.ExpiresAt.String(), Status: cs.Status, RevocationReason: cs.RevocationReason})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].IssuedAt < out[j].IssuedAt })
	return out
}

// Revocation is what revoking certificates for a reason changes, before
// anything is stored or applied.
type Revocation struct {
	Reason  string
	Changed []*CertState                    // the certificates it revokes, as they are now
	Blocked *CertState                      // a pinned key's compromise, as a pseudo-certificate
	Stored  []*CertState                    // what to store: Changed revoked, and Blocked
	Revoked []descriptor.RevokedCertificate // the next CRL's list
}

// Empty reports whether r changes nothing (all already revoked).
func (r Revocation) Empty() bool { return len(r.Changed) == 0 && r.Blocked == nil }

// Revoke computes the revocation of targets (certificates of nodeKey) for
// reason at now, on top of the current CRL cur; with PruneCRL the next
// CRL leaves out some expired certificates (listed). A key_compromise of a key
// without certificates to revoke (a pinned key, or one whose every
// certificate was revoked already; targets empty) is recorded as a
// pseudo-certificate so that it persists.
func (t *Authority) Revoke(cur *descriptor.CRL, targets []*CertState, nodeKey, reason string, now time.Time) Revocation {
	r := Revocation{Reason: reason}
	for _, rc := range cur.Revoked {
		if t.listed(rc.CertificateID, rc.Reason, now) {
			r.Revoked = append(r.Revoked, rc)
		}
	}
	for _, cs := range targets {
		if cs.Status == "revoked" {
			continue
		}
		if t.listed(cs.Parsed.CertID, reason, now) {
			r.Revoked = append(r.Revoked, descriptor.RevokedCertificate{CertificateID: cs.Parsed.CertID, RevokedAt: descriptor.TimeOf(now), Reason: reason, Issuer: t.KeyID})
		}
		upd := *cs
		upd.Status, upd.RevocationReason = "revoked", reason
		r.Stored = append(r.Stored, &upd)
		r.Changed = append(r.Changed, cs)
	}
	if reason == ReasonKeyCompromise && !t.Compromised[nodeKey] && len(targets) == 0 {
		cs := &CertState{Status: "revoked", RevocationReason: ReasonKeyCompromise, Parsed: &descriptor.JoinCertificate{CertID: PinnedCertID(nodeKey),
			NodePublicKey: nodeKey, NetworkName: t.Network, IssuedAt: descriptor.TimeOf(now), ExpiresAt: descriptor.TimeOf(now), IssuedBy: t.KeyID}}
		cs.Cert, _ = cs.Parsed.MarshalJSON()
		r.Blocked = cs
		r.Stored = append(r.Stored, cs)
	}
	return r
}

// Unrevoked returns the certificates of nodeKey not revoked yet.
func (t *Authority) Unrevoked(nodeKey string) []*CertState {
	var out []*CertState
	for _, cs := range t.ByKey[nodeKey] {
		if cs.Status != "revoked" {
			out = append(out, cs)
		}
	}
	return out
}

// CRLGrace is how long past its expiry a revoked certificate stays
// listed in new CRLs. An expired certificate is refused by its expiry
// alone; a CRL that listed every certificate ever revoked would grow
// without bound, past what a store takes in one write (etcd: 1.5 MiB,
// some 10,000 entries).
const CRLGrace = 24 * time.Hour

// listed reports whether a new CRL issued at now lists the certificate
// id revoked for reason: always without PruneCRL (the reference's CRL
// only grows), and always for key_compromise, which blocks the key for
// good also to a peer that knows only the CRL; otherwise unless the
// certificate expired more than CRLGrace ago, or is gone (its record
// expired, CertRetention after the certificate).
func (t *Authority) listed(id, reason string, now time.Time) bool {
	if !t.PruneCRL || reason == ReasonKeyCompromise {
		return true
	}
	cs, ok := t.Certs[id]
	return ok && now.Before(cs.Parsed.ExpiresAt.Instant().Add(CRLGrace))
}

// PinnedCertID is the id of the pseudo-certificate that records the
// key_compromise of a key without certificates (Revoke).
func PinnedCertID(nodeKey string) string { return "pinned:" + nodeKey }

// RevocationWrite is the one write that stores r with crl, the CRL that
// lists it, and evicts nodeKey's registration (on a shared store it
// rewrites the key's KindKeyCerts record too), with the registration it
// evicts (nil: none indexed) and its event. On a shared store the write
// deletes the key's descriptor record even when none is indexed: the
// deletion is conditional on what the node holds (none: none may exist),
// so a registration another node stored that this node's feed has not
// delivered makes the revocation lose rather than outlive it.
func (s *State) RevocationWrite(r Revocation, crl *descriptor.CRL, nodeKey string, shared bool) ([]store.Op, *Registration, []Event) {
	var ops []store.Op
	for _, cs := range r.Stored {
		ops = append(ops, store.Op{Record: CertRecord(cs)})
	}
	raw, _ := crl.MarshalJSON()
	ops = append(ops, store.Op{Record: store.Record{Kind: KindCRL, Key: "active", Value: raw}})
	ops = append(ops, s.KeyCertsOps(nodeKey)...)
	e, held := s.Lookup(nodeKey)
	if !held || e.Source != SourceDescriptor {
		if shared {
			ops = append(ops, store.Op{Record: store.Record{Kind: KindDescriptor, Key: nodeKey}, Delete: true})
		}
		return ops, nil, nil
	}
	ev := EventOf(EventRevoked, e)
	ev.Key, ev.Reason = nodeKey, "certificate revoked: "+r.Reason
	ops = append(ops, store.Op{Record: store.Record{Kind: KindDescriptor, Key: nodeKey}, Delete: true})
	return ops, e, []Event{ev}
}

// ApplyRevocation records r once it is durable (writer and readers' locks).
func (t *Authority) ApplyRevocation(r Revocation) {
	if r.Blocked != nil {
		t.AddCert(r.Blocked)
	}
	for _, cs := range r.Changed {
		t.SetStatus(cs, "revoked", r.Reason)
	}
}

var validRolePrefixes = []string{"role:anchor", "role:bridge", "role:client", "role:operator", "service:"}

// ValidRoles checks that every role is one the authority issues.
func ValidRoles(roles []string) error {
	for _, r := range roles {
		ok := false
		for _, p := range validRolePrefixes {
			if strings.HasPrefix(r, p) {
				ok = true
			}
		}
		if !ok {
			return fmt.Errorf("invalid role %q", r)
		}
	}
	return nil
}
