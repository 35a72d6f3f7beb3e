package registry

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/internal/pyjson"
)

// Revocation reasons accepted by the reference NA.
const (
	ReasonKeyCompromise = "key_compromise"
	ReasonCessation     = "cessation_of_operation"
	ReasonSuperseded    = "superseded"
	ReasonUnspecified   = "unspecified"
)

const (
	reasonCompromised = "node key revoked for key_compromise"
	kindCert          = "cert"
	kindInvite        = "invite"
	kindCRL           = "crl"
	kindSecret        = "secret"
)

// JoinCertificate is the RFC-001 certificate the authority issues to an
// enrolled node key (descriptor.JoinCertificate).
type JoinCertificate = descriptor.JoinCertificate

// RevokedCertificate is one CRL entry (descriptor.RevokedCertificate).
type RevokedCertificate = descriptor.RevokedCertificate

// CRL is the signed certificate revocation list (descriptor.CRL).
type CRL = descriptor.CRL

// certState is a certificate with the authority's bookkeeping.
type certState struct {
	Cert             json.RawMessage `json:"cert"`
	Status           string          `json:"status"` // "issued" | "revoked"
	RevocationReason string          `json:"revocation_reason,omitempty"`
	MaxValidityHours int             `json:"max_validity_hours"`
	cert             *JoinCertificate
}

type inviteState struct {
	Roles            []string  `json:"roles"`
	MaxValidityHours int       `json:"max_validity_hours"`
	ExpiresAt        time.Time `json:"expires_at"`
}

type trustState struct {
	network     string
	keyID       string
	authority   ed25519.PrivateKey
	root        ed25519.PrivateKey
	skew        time.Duration
	pinned      map[string]bool
	certs       map[string]*certState   // cert id →
	byKey       map[string][]*certState // node key →
	compromised map[string]bool
	crl         *CRL
	genesis     map[string]any
	policy      map[string]any // signed PolicyManifest, created on first GET /policy
	// onChange is told the node key whenever the trust of that key may
	// have changed (a certificate issued or revoked, a compromise mark), so
	// that cached verdicts are refreshed. Called under the node's write lock.
	onChange func(key string)
}

// verdict: key_compromise blocks for good; otherwise an active (issued,
// not revoked, not expired) certificate or operator pinning trusts.
func (t *trustState) verdict(key string, now time.Time) Verdict {
	v, _ := t.verdictUntil(key, now)
	return v
}

// verdictUntil is verdict plus the instant from which it may change
// without any trust change (the expiry of the certificate it rests on);
// callers cache it until then or until epoch moves.
func (t *trustState) verdictUntil(key string, now time.Time) (Verdict, time.Time) {
	forever := now.Add(100 * 365 * 24 * time.Hour)
	if t.compromised[key] {
		return Verdict{false, reasonCompromised}, forever
	}
	var best *certState
	for _, c := range t.byKey[key] {
		if c.Status == "revoked" || !now.Before(c.cert.ExpiresAt.Instant()) {
			continue
		}
		if best == nil || c.cert.ExpiresAt.Instant().After(best.cert.ExpiresAt.Instant()) {
			best = c
		}
	}
	if best != nil {
		return Verdict{true, "enrolled: join certificate " + best.cert.CertID + " valid until " + best.cert.ExpiresAt.String()}, best.cert.ExpiresAt.Instant()
	}
	if t.pinned[key] {
		return Verdict{true, "pinned by operator"}, forever
	}
	if len(t.byKey[key]) > 0 {
		return Verdict{false, "no active join certificate (revoked or expired)"}, forever
	}
	return Verdict{false, "node key is not enrolled"}, forever
}

func (t *trustState) changed(key string) {
	if t.onChange != nil {
		t.onChange(key)
	}
}

func (n *Node) loadTrust(ctx context.Context, now time.Time) error {
	t := &trustState{
		network: n.cfg.Network, keyID: n.cfg.AuthorityKeyID, skew: n.cfg.Skew,
		pinned: map[string]bool{}, certs: map[string]*certState{}, byKey: map[string][]*certState{}, compromised: map[string]bool{},
	}
	for _, k := range n.cfg.TrustedKeys {
		t.pinned[k] = true
	}
	var err error
	if t.authority, err = n.secretKey(ctx, now, n.cfg.Authority, "authority", "network-authority"); err != nil {
		return err
	}
	if t.root, err = n.secretKey(ctx, now, n.cfg.RootKey, "root", "root"); err != nil {
		return err
	}
	if t.root.Public().(ed25519.PublicKey).Equal(t.authority.Public()) {
		// RFC-001 rule 8: the root key that vouches for the network and the
		// NA key that signs certificates and CRLs are not collapsed.
		return errors.New("registry: the root key and the network-authority key are the same key; they must differ (RFC-001 rule 8)")
	}
	certs, err := n.st.List(ctx, kindCert, time.Time{})
	if err != nil {
		return fmt.Errorf("registry: load: %w", err)
	}
	for _, r := range certs {
		var cs certState
		if err := json.Unmarshal(r.Value, &cs); err != nil {
			return fmt.Errorf("registry: stored certificate %s: %w", r.Key, err)
		}
		c, err := descriptor.ParseJoinCertificate(cs.Cert)
		if err != nil {
			return fmt.Errorf("registry: stored certificate %s: %w", r.Key, err)
		}
		cs.cert = c
		t.addCert(&cs)
	}
	crls, err := n.st.List(ctx, kindCRL, now)
	if err != nil {
		return fmt.Errorf("registry: load: %w", err)
	}
	for _, r := range crls {
		if r.Key == "active" {
			c, err := descriptor.ParseCRL(r.Value)
			if err != nil {
				return fmt.Errorf("registry: stored CRL: %w", err)
			}
			t.crl = c
		}
	}
	n.trust = t
	t.onChange = n.trustChanged
	t.genesis = t.genesisBlock(now)
	return n.loadNonces(ctx, now)
}

// secretKey returns configured when set; otherwise the key kept in the
// store under name (kind "secret"), generated and persisted on first start.
func (n *Node) secretKey(ctx context.Context, now time.Time, configured ed25519.PrivateKey, name, role string) (ed25519.PrivateKey, error) {
	if configured != nil {
		return configured, nil
	}
	secrets, err := n.st.List(ctx, kindSecret, now)
	if err != nil {
		return nil, fmt.Errorf("registry: load: %w", err)
	}
	for _, r := range secrets {
		if r.Key == name && len(r.Value) == ed25519.SeedSize {
			return ed25519.NewKeyFromSeed(r.Value), nil
		}
	}
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	if err := n.st.Apply(ctx, Op{Record: Record{Kind: kindSecret, Key: name, Value: k.Seed()}}); err != nil {
		if won, ok := n.secretOfWinner(ctx, name, err); ok {
			return won, nil // another node started at the same time
		}
		return nil, fmt.Errorf("registry: persist %s key: %w", role, err)
	}
	n.log.Info("registry: generated a "+role+" key", "public_key", base64.StdEncoding.EncodeToString(k.Public().(ed25519.PublicKey)))
	return k, nil
}

func (t *trustState) addCert(cs *certState) {
	t.certs[cs.cert.CertID] = cs
	t.byKey[cs.cert.NodePublicKey] = append(t.byKey[cs.cert.NodePublicKey], cs)
	if cs.Status == "revoked" && cs.RevocationReason == ReasonKeyCompromise {
		t.compromised[cs.cert.NodePublicKey] = true
	}
	t.changed(cs.cert.NodePublicKey)
}

func (t *trustState) sign(obj map[string]any, key ed25519.PrivateKey, keyID string) descriptor.Signature {
	b, err := pyjson.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return descriptor.Signature{KeyID: keyID, Sig: base64.StdEncoding.EncodeToString(ed25519.Sign(key, b))}
}

// AuthorityPublicKey returns the standard base64 of the authority key.
func (n *Node) AuthorityPublicKey() string {
	return base64.StdEncoding.EncodeToString(n.trust.authority.Public().(ed25519.PublicKey))
}

// RootPublicKey returns the standard base64 of the root key, the key that
// signs the genesis block.
func (n *Node) RootPublicKey() string {
	return base64.StdEncoding.EncodeToString(n.trust.root.Public().(ed25519.PublicKey))
}

// genesisBlock builds the signed genesis block served at /genesis: the
// network name, the root key and the authority key that signs join
// certificates and CRLs, signed by the root key.
func (t *trustState) genesisBlock(now time.Time) map[string]any {
	year := now.UTC().Truncate(time.Hour)
	g := map[string]any{
		"network_name":    t.network,
		"network_version": "v1",
		"root_public_key": base64.StdEncoding.EncodeToString(t.root.Public().(ed25519.PublicKey)),
		"network_authority": map[string]any{
			"public_key": base64.StdEncoding.EncodeToString(t.authority.Public().(ed25519.PublicKey)),
			"valid_from": descriptor.TimeOf(year.Add(-24 * time.Hour)).String(),
			"valid_to":   descriptor.TimeOf(year.Add(10 * 365 * 24 * time.Hour)).String(),
		},
		"allowed_crypto_suites": []any{"ed25519", "x25519"},
		"allowed_transports":    []any{"quic", "wireguard"},
		"policy_manifest":       map[string]any{"hash": "sha256:none", "url": nil},
		"bootstrap_anchors":     []any{},
	}
	g["signatures"] = []any{sigObject(t.sign(g, t.root, "root"))}
	return g
}

func sigObject(s descriptor.Signature) map[string]any {
	return map[string]any{"key_id": s.KeyID, "sig": s.Sig}
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

var validRolePrefixes = []string{"role:anchor", "role:bridge", "role:client", "role:operator", "service:"}

func validRoles(roles []string) error {
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

// Enroll issues a join certificate for a node key directly (an operator
// action, no invite). It refuses keys blocked by key_compromise.
func (n *Node) Enroll(ctx context.Context, nodeKey string, roles []string, validity time.Duration) (*JoinCertificate, error) {
	if _, err := descriptor.DecodePublicKey(nodeKey); err != nil {
		return nil, refuse(CodeWordInvalidParams, "node_public_key: %v", err)
	}
	if len(roles) == 0 {
		roles = []string{"role:client"}
	}
	if err := validRoles(roles); err != nil {
		return nil, refuse(CodeWordInvalidParams, "%v", err)
	}
	if err := checkHours("validity", validity, MaxValidityHours); err != nil {
		return nil, err
	}
	if validity == 0 {
		validity = 168 * time.Hour
	}
	n.wmu.Lock()
	defer n.wmu.Unlock()
	return n.issueLocked(ctx, nodeKey, roles, validity, int(validity/time.Hour), nil)
}

func (n *Node) issueLocked(ctx context.Context, nodeKey string, roles []string, validity time.Duration, maxHours int, extra []Op) (*JoinCertificate, error) {
	t := n.trust
	if t.compromised[nodeKey] {
		return nil, withStatus("node_key_compromised", 403, CodeForbidden, "node public key has been revoked for key_compromise")
	}
	now := n.cfg.Now()
	c := &JoinCertificate{
		CertID: newUUID(), NodePublicKey: nodeKey, NetworkName: t.network, Roles: roles,
		IssuedAt: descriptor.TimeOf(now), ExpiresAt: descriptor.TimeOf(now.Add(validity)), IssuedBy: t.keyID,
	}
	c.Signatures = []descriptor.Signature{t.sign(c.Object(false), t.authority, t.keyID)}
	raw, _ := c.MarshalJSON()
	cs := &certState{Cert: raw, Status: "issued", MaxValidityHours: maxHours, cert: c}
	val, _ := json.Marshal(cs)
	ops := append(extra, Op{Record: Record{Kind: kindCert, Key: c.CertID, Value: val}})
	if err := n.apply(ctx, ops...); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	n.publish(func() { t.addCert(cs) })
	n.observeTrust("enrolled")
	return c, nil
}

// Invite creates a single-use invite token for /join. The token is
// returned once; the store keeps only its SHA-256.
func (n *Node) Invite(ctx context.Context, roles []string, maxValidity, tokenTTL time.Duration) (token string, expires time.Time, err error) {
	if len(roles) == 0 {
		roles = []string{"role:client"}
	}
	if err := validRoles(roles); err != nil {
		return "", time.Time{}, refuse(CodeWordInvalidParams, "%v", err)
	}
	if err := checkHours("max validity", maxValidity, MaxValidityHours); err != nil {
		return "", time.Time{}, err
	}
	if err := checkHours("token expiry", tokenTTL, MaxTokenExpiryHours); err != nil {
		return "", time.Time{}, err
	}
	if maxValidity == 0 {
		maxValidity = 168 * time.Hour
	}
	if tokenTTL == 0 {
		tokenTTL = 24 * time.Hour
	}
	var b [24]byte
	_, _ = rand.Read(b[:])
	token = base64.RawURLEncoding.EncodeToString(b[:])
	expires = n.cfg.Now().Add(tokenTTL)
	val, _ := json.Marshal(inviteState{Roles: roles, MaxValidityHours: int(maxValidity / time.Hour), ExpiresAt: expires})
	if err := n.st.Apply(ctx, Op{Record: Record{Kind: kindInvite, Key: tokenHash(token), Value: val, ExpiresAt: expires}}); err != nil {
		return "", time.Time{}, fmt.Errorf("registry: %w", err)
	}
	return token, expires, nil
}

func tokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// useInviteLocked consumes an invite; nil when unknown, used or expired.
func (n *Node) useInviteLocked(ctx context.Context, token string) (*inviteState, Op, error) {
	rs, err := n.st.List(ctx, kindInvite, n.cfg.Now())
	if err != nil {
		return nil, Op{}, err
	}
	h := tokenHash(token)
	for _, r := range rs {
		if r.Key == h {
			var inv inviteState
			if err := json.Unmarshal(r.Value, &inv); err != nil {
				return nil, Op{}, err
			}
			return &inv, Op{Record: Record{Kind: kindInvite, Key: h}, Delete: true}, nil
		}
	}
	return nil, Op{}, nil
}

// CurrentCRL returns the active signed CRL, creating the empty sequence-0
// one on first use.
func (n *Node) CurrentCRL(ctx context.Context) (*CRL, error) {
	n.wmu.Lock()
	defer n.wmu.Unlock()
	if n.trust.crl != nil {
		return n.trust.crl, nil
	}
	c := n.newCRLLocked(0, nil)
	if err := n.saveCRLLocked(ctx, c, nil); err != nil {
		return nil, err
	}
	return c, nil
}

func (n *Node) newCRLLocked(seq int64, revoked []RevokedCertificate) *CRL {
	now := n.cfg.Now()
	c := &CRL{CRLID: newUUID(), Sequence: seq, IssuedAt: descriptor.TimeOf(now), NextUpdate: descriptor.TimeOf(now.Add(24 * time.Hour)),
		Issuer: n.trust.keyID, Revoked: revoked}
	c.Signatures = []descriptor.Signature{n.trust.sign(c.Object(false), n.trust.authority, n.trust.keyID)}
	return c
}

func (n *Node) saveCRLLocked(ctx context.Context, c *CRL, extra []Op) error {
	raw, _ := c.MarshalJSON()
	if err := n.apply(ctx, append(extra, Op{Record: Record{Kind: kindCRL, Key: "active", Value: raw}})...); err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	n.trust.crl = c
	return nil
}

// RevokeResult is the reference's answer to /admin/revoke.
type RevokeResult struct {
	CRLSequence  int64    `json:"crl_sequence"`
	RevokedCount int      `json:"revoked_count"`
	Evicted      []string `json:"evicted,omitempty"`
}

// Revoke revokes certificates — one by id, or every active one of a node
// key — appends them to a new signed CRL (sequence + 1) and evicts the
// node's registry entries at once, whatever the reason. key_compromise
// blocks the key for good.
func (n *Node) Revoke(ctx context.Context, certID, nodeKey, reason string) (RevokeResult, error) {
	if reason == "" {
		reason = ReasonUnspecified
	}
	switch reason {
	case ReasonKeyCompromise, ReasonCessation, ReasonSuperseded, ReasonUnspecified:
	default:
		return RevokeResult{}, withStatus("invalid_revocation_reason", 400, 0-32602, "invalid revocation reason %q", reason)
	}
	n.wmu.Lock()
	defer n.wmu.Unlock()
	t := n.trust
	var targets []*certState
	switch {
	case certID != "":
		cs, ok := t.certs[certID]
		if !ok {
			return RevokeResult{}, withStatus("certificate_not_found", 404, CodeNotFound, "unknown certificate %q", certID)
		}
		targets = []*certState{cs}
		nodeKey = cs.cert.NodePublicKey
	case nodeKey != "":
		targets = append(targets, t.byKey[nodeKey]...)
		if len(targets) == 0 && reason != ReasonKeyCompromise {
			return RevokeResult{}, withStatus("certificate_not_found", 404, CodeNotFound, "node key %s holds no certificate", short(nodeKey))
		}
	default:
		return RevokeResult{}, refuse(CodeWordInvalidParams, "cert_id or node_public_key required")
	}
	cur := t.crl
	if cur == nil {
		cur = n.newCRLLocked(0, nil)
	}
	now := n.cfg.Now()
	revoked := append([]RevokedCertificate(nil), cur.Revoked...)
	var ops []Op
	var changed []*certState
	for _, cs := range targets {
		if cs.Status == "revoked" {
			continue
		}
		revoked = append(revoked, RevokedCertificate{CertificateID: cs.cert.CertID, RevokedAt: descriptor.TimeOf(now), Reason: reason, Issuer: t.keyID})
		upd := *cs
		upd.Status, upd.RevocationReason = "revoked", reason
		val, _ := json.Marshal(&upd)
		ops = append(ops, Op{Record: Record{Kind: kindCert, Key: cs.cert.CertID, Value: val}})
		changed = append(changed, cs)
	}
	blockKey := reason == ReasonKeyCompromise && !t.compromised[nodeKey] && len(targets) == 0
	if len(changed) == 0 && !blockKey {
		// Already revoked: the reference returns the current CRL unchanged.
		if t.crl == nil {
			if err := n.saveCRLLocked(ctx, cur, nil); err != nil {
				return RevokeResult{}, err
			}
		}
		return RevokeResult{CRLSequence: cur.Sequence, RevokedCount: len(cur.Revoked)}, nil
	}
	var blocked *certState
	if blockKey {
		// A pinned key without certificates: record the compromise as a
		// pseudo-certificate so it persists.
		cs := &certState{Status: "revoked", RevocationReason: ReasonKeyCompromise, cert: &JoinCertificate{CertID: "pinned:" + nodeKey, NodePublicKey: nodeKey, NetworkName: t.network, IssuedAt: descriptor.TimeOf(now), ExpiresAt: descriptor.TimeOf(now), IssuedBy: t.keyID}}
		cs.Cert, _ = cs.cert.MarshalJSON()
		val, _ := json.Marshal(cs)
		ops = append(ops, Op{Record: Record{Kind: kindCert, Key: cs.cert.CertID, Value: val}})
		blocked = cs
	}
	crl := n.newCRLLocked(cur.Sequence+1, revoked)
	if err := n.saveCRLLocked(ctx, crl, ops); err != nil {
		return RevokeResult{}, err
	}
	n.publish(func() {
		if blocked != nil {
			t.addCert(blocked)
		}
		for _, cs := range changed {
			cs.Status, cs.RevocationReason = "revoked", reason
			if reason == ReasonKeyCompromise {
				t.compromised[cs.cert.NodePublicKey] = true
			}
			t.changed(cs.cert.NodePublicKey)
		}
	})
	n.observeTrust("revoked")
	res := RevokeResult{CRLSequence: crl.Sequence, RevokedCount: len(crl.Revoked)}
	if ok, err := n.deregisterLocked(ctx, nodeKey, EventRevoked, "certificate revoked: "+reason); err != nil {
		return res, err
	} else if ok {
		res.Evicted = append(res.Evicted, nodeKey)
	}
	return res, nil
}

// Certificates returns the certificates held by a node key (all when
// nodeKey is empty), oldest first.
func (n *Node) Certificates(nodeKey string) []CertificateStatus {
	n.mu.RLock()
	defer n.mu.RUnlock()
	var out []CertificateStatus
	for _, cs := range n.trust.certs {
		if nodeKey != "" && cs.cert.NodePublicKey != nodeKey {
			continue
		}
		out = append(out, CertificateStatus{CertID: cs.cert.CertID, NodePublicKey: cs.cert.NodePublicKey, Roles: cs.cert.Roles,
			IssuedAt: cs.cert.IssuedAt.String(), ExpiresAt: cs.cert.ExpiresAt.String(), Status: cs.Status, RevocationReason: cs.RevocationReason})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].IssuedAt < out[j].IssuedAt })
	return out
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
