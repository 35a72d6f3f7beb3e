package registry

import (
	"context"
	"time"

	"github.com/capmesh/capmesh/registry/internal/signed"
)

// The signed requests of the RFC-005 Network-Authority surface: each
// checks its signature, time window and nonce and performs its change
// under the node's writer lock, so that a replayed or racing request
// cannot take effect twice. Package registry/api decodes them from HTTP.

// DeleteSigned deregisters the descriptor registered under key, on the
// agent's own signature over "delete-agent|<version>|<key>|<signedAt>"
// made within five minutes of now and never used before.
func (n *Node) DeleteSigned(ctx context.Context, key, version, signedAt, sig string) error {
	now := n.cfg.Now()
	ts, err := signed.Delete(key, version, signedAt, sig, now)
	if err != nil {
		return err
	}
	n.wmu.Lock()
	defer n.wmu.Unlock()
	e, ok := n.state.Lookup(key)
	if !ok || e.Source != SourceDescriptor {
		return refuse(CodeWordNotRegistered, "agent not registered")
	}
	if ts.Instant().Before(e.RegisteredAt) {
		return refuse(CodeWordReplay, "signed_at %s predates the registration it would delete (%s)", ts, e.RegisteredAt.Format(time.RFC3339Nano))
	}
	if fresh, err := n.useNonceLocked(ctx, "delete:"+key, sig, now.Add(10*time.Minute)); err != nil || !fresh {
		if err == nil {
			err = refuse(CodeWordReplay, "this deletion envelope was already used")
		}
		return err
	}
	_, err = n.deregisterLocked(ctx, key, EventDeregistered, "DELETE /agents")
	return err
}

// Join enrols nodeKey with an invite token: body is the node-signed
// request (proof of possession of nodeKey first, so that nothing about
// the key is revealed to a caller who does not hold it), the token is
// spent, and a join certificate of at most the invite's validity is
// issued.
func (n *Node) Join(ctx context.Context, body map[string]any, nodeKey, token string, hours int) (*JoinCertificate, error) {
	n.wmu.Lock()
	defer n.wmu.Unlock()
	if err := n.verifyNodeRequest(ctx, body, nodeKey, "join:"+nodeKey); err != nil {
		return nil, err
	}
	inv, del, err := n.useInviteLocked(ctx, token)
	if err != nil {
		return nil, err
	}
	if inv == nil {
		return nil, withStatus("invalid_invite_token", 403, CodeForbidden, "invalid, expired, or used invite token")
	}
	hours = min(hours, inv.MaxValidityHours)
	return n.issueLocked(ctx, nodeKey, inv.Roles, time.Duration(hours)*time.Hour, inv.MaxValidityHours, []Op{del})
}

// Renew issues a fresh certificate for certID to its node, on the node's
// signed request: the certificate must be known, the node's, unrevoked
// and unexpired, and roles (when given) unchanged.
func (n *Node) Renew(ctx context.Context, body map[string]any, certID, nodeKey string, roles []string, hours int) (*JoinCertificate, error) {
	n.wmu.Lock()
	defer n.wmu.Unlock()
	if err := n.verifyNodeRequest(ctx, body, nodeKey, "node:"+nodeKey); err != nil {
		return nil, err
	}
	cs, maxH, err := n.state.Trust.Renewal(certID, nodeKey, roles, n.cfg.Now())
	if err != nil {
		return nil, err
	}
	hours = min(hours, maxH)
	return n.issueLocked(ctx, nodeKey, cs.Parsed.Roles, time.Duration(hours)*time.Hour, maxH, nil)
}

// NodeHeartbeat checks a node's signed heartbeat for its certificate
// certID and returns the node's time.
func (n *Node) NodeHeartbeat(ctx context.Context, body map[string]any, certID, nodeKey string) (time.Time, error) {
	n.wmu.Lock()
	defer n.wmu.Unlock()
	if err := n.state.Trust.HeartbeatCert(certID, nodeKey); err != nil {
		return time.Time{}, err
	}
	if err := n.verifyNodeRequest(ctx, body, nodeKey, "node:"+nodeKey); err != nil {
		return time.Time{}, err
	}
	return n.cfg.Now(), nil
}

// verifyNodeRequest checks a node-signed request body (signed.NodeRequest)
// and spends its nonce in scope. The caller holds wmu.
func (n *Node) verifyNodeRequest(ctx context.Context, o map[string]any, nodeKey, scope string) error {
	now := n.cfg.Now()
	nonce, err := signed.NodeRequest(o, nodeKey, now, n.cfg.Skew)
	if err != nil {
		return err
	}
	fresh, err := n.useNonceLocked(ctx, scope, nonce, now.Add(2*n.cfg.Skew))
	if err != nil {
		return err
	}
	if !fresh {
		return signed.NodeReplay()
	}
	return nil
}

// AdminAuth is an operator's signature on an admin request: the
// X-Admin-Key-Id, -Signature, -Timestamp and -Nonce headers of the
// reference.
type AdminAuth struct {
	KeyID, Signature, Timestamp, Nonce string
}

// VerifyAdmin checks that an operator key of Config.OperatorKeys signed
// PY_JSON of {"body","key_id","nonce","timestamp"} within the skew, with
// a nonce never used before.
func (n *Node) VerifyAdmin(ctx context.Context, a AdminAuth, body map[string]any) error {
	now := n.cfg.Now()
	if err := signed.CheckAdmin(n.cfg.OperatorKeys, signed.Admin(a), body, now, n.cfg.Skew); err != nil {
		return err
	}
	n.wmu.Lock()
	defer n.wmu.Unlock()
	fresh, err := n.useNonceLocked(ctx, "admin:"+a.KeyID, a.Nonce, now.Add(2*n.cfg.Skew))
	if err != nil {
		return err
	}
	if !fresh {
		return signed.AdminFailed("admin nonce already used")
	}
	return nil
}

// Genesis returns the network's genesis block, as GET /genesis serves it.
func (n *Node) Genesis() map[string]any { return n.state.Trust.Genesis }
