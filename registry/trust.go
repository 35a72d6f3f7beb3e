package registry

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/capmesh/capmesh/registry/internal/state"

	"github.com/capmesh/capmesh/registry/descriptor"
)

// Revocation reasons accepted by the reference NA.
const (
	ReasonKeyCompromise = state.ReasonKeyCompromise
	ReasonCessation     = "cessation_of_operation"
	ReasonSuperseded    = "superseded"
	ReasonUnspecified   = "unspecified"
)

const (
	kindInvite = state.KindInvite
	kindSecret = "secret"
)

// JoinCertificate is the RFC-001 certificate the authority issues to an
// enrolled node key (descriptor.JoinCertificate).
type JoinCertificate = descriptor.JoinCertificate

// RevokedCertificate is one CRL entry (descriptor.RevokedCertificate).
type RevokedCertificate = descriptor.RevokedCertificate

// CRL is the signed certificate revocation list (descriptor.CRL).
type CRL = descriptor.CRL

func (n *Node) loadTrust(ctx context.Context, now time.Time) error {
	var authority, root ed25519.PrivateKey
	var err error
	if authority, err = n.secretKey(ctx, now, n.cfg.Authority, "authority", "network-authority"); err != nil {
		return err
	}
	if root, err = n.secretKey(ctx, now, n.cfg.RootKey, "root", "root"); err != nil {
		return err
	}
	if root.Public().(ed25519.PublicKey).Equal(authority.Public()) {
		// RFC-001 rule 8: the root key that vouches for the network and the
		// NA key that signs certificates and CRLs are not collapsed.
		return errors.New("registry: the root key and the network-authority key are the same key; they must differ (RFC-001 rule 8)")
	}
	t := state.NewAuthority(n.cfg.Network, n.cfg.AuthorityKeyID, authority, root, n.cfg.TrustedKeys)
	t.PruneCRL = n.shared != nil
	certs, err := n.st.List(ctx, kindCert, now)
	if err != nil {
		return fmt.Errorf("registry: load: %w", err)
	}
	crls, err := n.st.List(ctx, kindCRL, now)
	if err != nil {
		return fmt.Errorf("registry: load: %w", err)
	}
	legacy, err := t.Fill(certs, crls)
	if err != nil {
		return err
	}
	t.Genesis = t.GenesisBlock(now)
	n.state.SetTrust(t)
	if err := state.InSteps(legacy, n.shared != nil, func(ops []Op) error { return n.apply(ctx, ops...) }); err != nil {
		n.log.Warn("registry: load: certificate records stored without an expiry keep none until the next start", "err", err)
	}
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
	if k, ok := state.SeedOf(secrets, name); ok {
		return k, nil
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

// AuthorityPublicKey returns the standard base64 of the authority key.
func (n *Node) AuthorityPublicKey() string {
	return base64.StdEncoding.EncodeToString(n.state.Trust.Key.Public().(ed25519.PublicKey))
}

// RootPublicKey returns the standard base64 of the root key, the key that
// signs the genesis block.
func (n *Node) RootPublicKey() string {
	return base64.StdEncoding.EncodeToString(n.state.Trust.Root.Public().(ed25519.PublicKey))
}

// Enroll issues a join certificate for a node key directly (an operator
// action, no invite). It refuses keys blocked by key_compromise.
func (n *Node) Enroll(ctx context.Context, nodeKey string, roles []string, validity time.Duration) (*JoinCertificate, error) {
	if _, err := descriptor.DecodePublicKey(nodeKey); err != nil {
		return nil, refuse(CodeWordInvalidParams, "node_public_key: %v", err)
	}
	roles, err := state.Roles(roles)
	if err != nil {
		return nil, err
	}
	if err := state.CheckHours("validity", validity, MaxValidityHours); err != nil {
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
	t := n.state.Trust
	if err := t.MayIssue(nodeKey); err != nil {
		return nil, err
	}
	cs := t.Issue(nodeKey, roles, n.cfg.Now(), validity, maxHours)
	c := cs.Parsed
	ops := append(append(extra, Op{Record: state.CertRecord(cs)}), n.state.KeyCertsOps(nodeKey)...)
	// In a fleet, also the CRL as this node holds it: every revocation
	// rewrites it, a key_compromise not yet delivered here included; the
	// key's record (KeyCertsOps) makes a revocation by key that has not
	// seen this certificate lose.
	if err := n.applyIf(ctx, n.state.CRLConds(), ops...); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	n.publish(func() { t.AddCert(cs) })
	n.observeTrust("enrolled")
	return c, nil
}

// Invite creates a single-use invite token for /join. The token is
// returned once; the store keeps only its SHA-256.
func (n *Node) Invite(ctx context.Context, roles []string, maxValidity, tokenTTL time.Duration) (token string, expires time.Time, err error) {
	roles, err = state.Roles(roles)
	if err != nil {
		return "", time.Time{}, err
	}
	if err := state.CheckHours("max validity", maxValidity, MaxValidityHours); err != nil {
		return "", time.Time{}, err
	}
	if err := state.CheckHours("token expiry", tokenTTL, MaxTokenExpiryHours); err != nil {
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
	val, _ := json.Marshal(state.Invite{Roles: roles, MaxValidityHours: int(maxValidity / time.Hour), ExpiresAt: expires})
	if err := n.st.Apply(ctx, Op{Record: Record{Kind: kindInvite, Key: state.TokenHash(token), Value: val, ExpiresAt: expires}}); err != nil {
		return "", time.Time{}, fmt.Errorf("registry: %w", err)
	}
	return token, expires, nil
}

// useInviteLocked consumes an invite; nil when unknown, used or expired.
func (n *Node) useInviteLocked(ctx context.Context, token string) (*state.Invite, Op, error) {
	rs, err := n.st.List(ctx, kindInvite, n.cfg.Now())
	if err != nil {
		return nil, Op{}, err
	}
	inv, err := state.FindInvite(rs, token)
	if inv == nil || err != nil {
		return nil, Op{}, err
	}
	return inv, Op{Record: Record{Kind: kindInvite, Key: state.TokenHash(token)}, Delete: true}, nil
}

// CurrentCRL returns the active signed CRL, creating the empty sequence-0
// one on first use.
func (n *Node) CurrentCRL(ctx context.Context) (*CRL, error) {
	n.wmu.Lock()
	defer n.wmu.Unlock()
	if n.state.Trust.CRL != nil {
		return n.state.Trust.CRL, nil
	}
	c := n.state.Trust.NewCRL(0, nil, n.cfg.Now())
	if err := n.saveCRLLocked(ctx, c, nil); err != nil {
		return nil, err
	}
	return c, nil
}

func (n *Node) saveCRLLocked(ctx context.Context, c *CRL, extra []Op) error {
	raw, _ := c.MarshalJSON()
	if err := n.apply(ctx, append(extra, Op{Record: Record{Kind: kindCRL, Key: "active", Value: raw}})...); err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	n.state.Trust.CRL = c
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
	reason, err := state.RevocationReason(reason)
	if err != nil {
		return RevokeResult{}, err
	}
	n.wmu.Lock()
	defer n.wmu.Unlock()
	targets, nodeKey, err := n.state.Trust.RevocationTargets(certID, nodeKey, reason)
	if err != nil {
		return RevokeResult{}, err
	}
	// On a shared store a transaction's size is bounded: a key's many
	// certificates are revoked in steps, the first evicting its entry.
	step := len(targets)
	if n.shared != nil {
		step = min(step, revokeStep)
	}
	var evicted []string
	for len(targets) > step {
		res, err := n.revokeLocked(ctx, targets[:step], nodeKey, reason)
		if err != nil {
			return RevokeResult{}, err
		}
		evicted, targets = append(evicted, res.Evicted...), targets[step:]
	}
	res, err := n.revokeLocked(ctx, targets, nodeKey, reason)
	res.Evicted = append(evicted, res.Evicted...)
	return res, err
}

// revokeStep is how many certificates one write revokes on a shared
// store: with their conditions, well within etcd's 128 operations.
const revokeStep = state.SharedStep

// revokeLocked is Revoke's write of the revocation of targets, certificates of nodeKey.
func (n *Node) revokeLocked(ctx context.Context, targets []*state.CertState, nodeKey, reason string) (RevokeResult, error) {
	t := n.state.Trust
	cur := t.CRL
	if cur == nil {
		cur = t.NewCRL(0, nil, n.cfg.Now())
	}
	rv := t.Revoke(cur, targets, nodeKey, reason, n.cfg.Now())
	if rv.Empty() {
		// Already revoked: the reference returns the current CRL unchanged.
		if t.CRL == nil {
			if err := n.saveCRLLocked(ctx, cur, nil); err != nil {
				return RevokeResult{}, err
			}
		}
		return RevokeResult{CRLSequence: cur.Sequence, RevokedCount: len(cur.Revoked)}, nil
	}
	crl := t.NewCRL(cur.Sequence+1, rv.Revoked, n.cfg.Now())
	ops, e, evs := n.state.RevocationWrite(rv, crl, nodeKey, n.shared != nil)
	if err := n.commit(ctx, ops, evs...); err != nil {
		return RevokeResult{}, fmt.Errorf("registry: %w", err)
	}
	n.publish(func() {
		t.ApplyRevocation(rv)
		t.CRL = crl
		if e != nil {
			n.state.Unindex(e)
		}
	})
	n.observeTrust("revoked")
	res := RevokeResult{CRLSequence: crl.Sequence, RevokedCount: len(crl.Revoked)}
	if e != nil {
		res.Evicted = append(res.Evicted, nodeKey)
	}
	return res, nil
}

// Certificates returns the certificates held by a node key (all when
// nodeKey is empty), oldest first: until state.CertRetention after their
// expiry, for good when revoked for key_compromise.
func (n *Node) Certificates(nodeKey string) []CertificateStatus {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.state.Trust.Certificates(nodeKey)
}

// CertificateStatus summarises one certificate for operators.
type CertificateStatus = state.CertificateStatus
