package registry

import (
	"context"
	"encoding/base64"
	"slices"
	"time"

	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/internal/pyjson"
)

// The signed requests of the RFC-005 Network-Authority surface: each
// checks its signature, time window and nonce and performs its change
// under the node's writer lock, so that a replayed or racing request
// cannot take effect twice. Package registry/api decodes them from HTTP.

// DeleteSigned deregisters the descriptor registered under key, on the
// agent's own signature over "delete-agent|<version>|<key>|<signedAt>"
// made within five minutes of now and never used before.
func (n *Node) DeleteSigned(ctx context.Context, key, version, signedAt, sig string) error {
	if version == "" {
		version = "v1"
	}
	if sig == "" || signedAt == "" {
		return withStatus("delete_signature_required", 401, CodeUnauthorized, "signature and signed_at required")
	}
	ts, err := descriptor.ParseTime(signedAt)
	if err != nil {
		return withStatus("invalid_signed_at", 400, -32602, "signed_at: %v", err)
	}
	now := n.cfg.Now()
	if d := now.Sub(ts.Instant()); d > 300*time.Second || d < -300*time.Second {
		return withStatus("signed_at_outside_window", 401, CodeUnauthorized, "signed_at outside +/-5 min window")
	}
	if err := descriptor.VerifySignature(key, []byte("delete-agent|"+version+"|"+key+"|"+signedAt), sig); err != nil {
		return withStatus(descriptor.CodeInvalidSignature, 401, CodeUnauthorized, "%v", err)
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
	cs, ok := n.state.Trust.Certs[certID]
	switch {
	case !ok:
		return nil, withStatus("certificate_not_found", 403, CodeForbidden, "unknown certificate; cannot renew")
	case cs.Parsed.NodePublicKey != nodeKey:
		return nil, withStatus("certificate_key_mismatch", 403, CodeForbidden, "public key does not match certificate")
	case cs.Status == "revoked":
		return nil, withStatus("certificate_revoked", 403, CodeForbidden, "certificate revoked")
	case !n.cfg.Now().Before(cs.Parsed.ExpiresAt.Instant()):
		return nil, withStatus("certificate_expired", 403, CodeForbidden, "certificate expired; re-enrollment required")
	}
	if roles != nil && !sameSet(roles, cs.Parsed.Roles) {
		return nil, withStatus("renewal_role_change_forbidden", 403, CodeForbidden, "role changes are not permitted during renewal")
	}
	maxH := cs.MaxValidityHours
	if maxH <= 0 {
		maxH = 168
	}
	hours = min(hours, maxH)
	return n.issueLocked(ctx, nodeKey, cs.Parsed.Roles, time.Duration(hours)*time.Hour, maxH, nil)
}

// sameSet reports whether a and b hold the same strings, counting repeats.
func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// NodeHeartbeat checks a node's signed heartbeat for its certificate
// certID and returns the node's time.
func (n *Node) NodeHeartbeat(ctx context.Context, body map[string]any, certID, nodeKey string) (time.Time, error) {
	n.wmu.Lock()
	defer n.wmu.Unlock()
	cs, ok := n.state.Trust.Certs[certID]
	if !ok || cs.Parsed.NodePublicKey != nodeKey {
		return time.Time{}, withStatus("certificate_not_found", 403, CodeForbidden, "unknown certificate")
	}
	if cs.Status == "revoked" {
		return time.Time{}, withStatus("certificate_revoked", 403, CodeForbidden, "certificate revoked")
	}
	if err := n.verifyNodeRequest(ctx, body, nodeKey, "node:"+nodeKey); err != nil {
		return time.Time{}, err
	}
	return n.cfg.Now(), nil
}

// verifyNodeRequest checks a node-signed request body: signature by
// nodeKey over PY_JSON of the body without "signature", |now − timestamp|
// within the skew, and a fresh nonce in scope. The caller holds wmu.
func (n *Node) verifyNodeRequest(ctx context.Context, o map[string]any, nodeKey, scope string) error {
	sig, _ := o["signature"].(string)
	ts, _ := o["timestamp"].(string)
	nonce, _ := o["nonce"].(string)
	if sig == "" || ts == "" || nonce == "" {
		return withStatus("node_auth_failed", 401, CodeUnauthorized, "missing authentication fields: signature, timestamp and nonce required")
	}
	t, err := descriptor.ParseTime(ts)
	if err != nil {
		return withStatus("node_auth_failed", 401, CodeUnauthorized, "invalid timestamp: %v", err)
	}
	now := n.cfg.Now()
	if d := now.Sub(t.Instant()); d > n.cfg.Skew || d < -n.cfg.Skew {
		return withStatus("node_auth_failed", 401, CodeUnauthorized, "request timestamp outside ±%s", n.cfg.Skew)
	}
	body := make(map[string]any, len(o))
	for k, v := range o {
		if k != "signature" {
			body[k] = v
		}
	}
	msg, err := pyjson.Marshal(body)
	if err != nil {
		return refuse(CodeWordInvalidParams, "%v", err)
	}
	if err := descriptor.VerifySignature(nodeKey, msg, sig); err != nil {
		return withStatus("node_auth_failed", 401, CodeUnauthorized, "invalid signature: %v", err)
	}
	fresh, err := n.useNonceLocked(ctx, scope, nonce, now.Add(2*n.cfg.Skew))
	if err != nil {
		return err
	}
	if !fresh {
		return withStatus("node_auth_failed", 401, CodeUnauthorized, "nonce already used (replay detected)")
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
	fail := func(format string, args ...any) error {
		return withStatus("admin_auth_failed", 401, CodeUnauthorized, format, args...)
	}
	if a.KeyID == "" || a.Signature == "" || a.Timestamp == "" || a.Nonce == "" {
		return fail("missing admin authentication headers")
	}
	pub, ok := n.cfg.OperatorKeys[a.KeyID]
	if !ok {
		return fail("unknown admin key")
	}
	t, err := descriptor.ParseTime(a.Timestamp)
	if err != nil {
		return fail("invalid admin timestamp: %v", err)
	}
	now := n.cfg.Now()
	if d := now.Sub(t.Instant()); d > n.cfg.Skew || d < -n.cfg.Skew {
		return fail("admin request timestamp too old")
	}
	msg, err := pyjson.Marshal(map[string]any{"body": body, "key_id": a.KeyID, "nonce": a.Nonce, "timestamp": a.Timestamp})
	if err != nil {
		return fail("%v", err)
	}
	if err := descriptor.VerifySignature(base64.StdEncoding.EncodeToString(pub), msg, a.Signature); err != nil {
		return fail("invalid admin signature: %v", err)
	}
	n.wmu.Lock()
	defer n.wmu.Unlock()
	fresh, err := n.useNonceLocked(ctx, "admin:"+a.KeyID, a.Nonce, now.Add(2*n.cfg.Skew))
	if err != nil {
		return err
	}
	if !fresh {
		return fail("admin nonce already used")
	}
	return nil
}

// Genesis returns the network's genesis block, as GET /genesis serves it.
func (n *Node) Genesis() map[string]any { return n.state.Trust.Genesis }
