// Package signed checks the signed requests of the RFC-005
// Network-Authority surface — a DELETE /agents envelope, a node-signed
// request (/join, /renew, /heartbeat) and an operator's admin request —
// up to their nonce: the fields are present, the timestamp parses and lies
// within the window, and the signature verifies. It is pure: spending the
// nonce, which needs the store and the node's writer lock, is package
// registry's, and so is the change a request makes. Refusals are
// registry/internal/refusal's, word for word what clients always got.
package signed

import (
	"crypto/ed25519"
	"encoding/base64"
	"time"

	"github.com/capmesh/capmesh/internal/errcatalog"
	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/internal/pyjson"
	"github.com/capmesh/capmesh/registry/internal/refusal"
)

// DeleteWindow is how far a DELETE envelope's signed_at may lie from now,
// either way (the reference's five minutes).
const DeleteWindow = 300 * time.Second

// within parses a request's timestamp and reports whether it lies within
// skew of now, either way.
func within(ts string, now time.Time, skew time.Duration) (descriptor.Time, bool, error) {
	t, err := descriptor.ParseTime(ts)
	if err != nil {
		return t, false, err
	}
	d := now.Sub(t.Instant())
	return t, d <= skew && d >= -skew, nil
}

// Delete checks the agent's signature over
// "delete-agent|<version>|<key>|<signedAt>" (version "v1" when empty) made
// within DeleteWindow of now, and returns signedAt parsed.
func Delete(key, version, signedAt, sig string, now time.Time) (descriptor.Time, error) {
	if version == "" {
		version = "v1"
	}
	if sig == "" || signedAt == "" {
		return descriptor.Time{}, refusal.WithStatus("delete_signature_required", 401, errcatalog.Unauthorized, "signature and signed_at required")
	}
	ts, ok, err := within(signedAt, now, DeleteWindow)
	if err != nil {
		return descriptor.Time{}, refusal.WithStatus("invalid_signed_at", 400, -32602, "signed_at: %v", err)
	}
	if !ok {
		return descriptor.Time{}, refusal.WithStatus("signed_at_outside_window", 401, errcatalog.Unauthorized, "signed_at outside +/-5 min window")
	}
	if err := descriptor.VerifySignature(key, []byte("delete-agent|"+version+"|"+key+"|"+signedAt), sig); err != nil {
		return descriptor.Time{}, refusal.WithStatus(descriptor.CodeInvalidSignature, 401, errcatalog.Unauthorized, "%v", err)
	}
	return ts, nil
}

// nodeFailed is the refusal of a node-signed request.
func nodeFailed(format string, args ...any) *refusal.Error {
	return refusal.WithStatus("node_auth_failed", 401, errcatalog.Unauthorized, format, args...)
}

// NodeRequest checks a node-signed request body o: signature by nodeKey
// over PY_JSON of the body without "signature", |now − timestamp| within
// skew. It returns the request's nonce, which the caller must spend.
func NodeRequest(o map[string]any, nodeKey string, now time.Time, skew time.Duration) (nonce string, err error) {
	sig, _ := o["signature"].(string)
	ts, _ := o["timestamp"].(string)
	nonce, _ = o["nonce"].(string)
	if sig == "" || ts == "" || nonce == "" {
		return "", nodeFailed("missing authentication fields: signature, timestamp and nonce required")
	}
	_, ok, err := within(ts, now, skew)
	if err != nil {
		return "", nodeFailed("invalid timestamp: %v", err)
	}
	if !ok {
		return "", nodeFailed("request timestamp outside ±%s", skew)
	}
	body := make(map[string]any, len(o))
	for k, v := range o {
		if k != "signature" {
			body[k] = v
		}
	}
	msg, err := pyjson.Marshal(body)
	if err != nil {
		return "", refusal.New(refusal.InvalidParams, "%v", err)
	}
	if err := descriptor.VerifySignature(nodeKey, msg, sig); err != nil {
		return "", nodeFailed("invalid signature: %v", err)
	}
	return nonce, nil
}

// NodeReplay is the refusal of a node-signed request whose nonce was
// spent already.
func NodeReplay() error { return nodeFailed("nonce already used (replay detected)") }

// Admin is an operator's signature on an admin request: the
// X-Admin-Key-Id, -Signature, -Timestamp and -Nonce headers of the
// reference (registry.AdminAuth).
type Admin struct {
	KeyID, Signature, Timestamp, Nonce string
}

// AdminFailed is the refusal of an admin request.
func AdminFailed(format string, args ...any) error {
	return refusal.WithStatus("admin_auth_failed", 401, errcatalog.Unauthorized, format, args...)
}

// CheckAdmin checks that the operator key a.KeyID of keys signed PY_JSON
// of {"body","key_id","nonce","timestamp"} within skew of now. The caller
// must spend a.Nonce.
func CheckAdmin(keys map[string]ed25519.PublicKey, a Admin, body map[string]any, now time.Time, skew time.Duration) error {
	if a.KeyID == "" || a.Signature == "" || a.Timestamp == "" || a.Nonce == "" {
		return AdminFailed("missing admin authentication headers")
	}
	pub, ok := keys[a.KeyID]
	if !ok {
		return AdminFailed("unknown admin key")
	}
	_, ok, err := within(a.Timestamp, now, skew)
	if err != nil {
		return AdminFailed("invalid admin timestamp: %v", err)
	}
	if !ok {
		return AdminFailed("admin request timestamp too old")
	}
	msg, err := pyjson.Marshal(map[string]any{"body": body, "key_id": a.KeyID, "nonce": a.Nonce, "timestamp": a.Timestamp})
	if err != nil {
		return AdminFailed("%v", err)
	}
	if err := descriptor.VerifySignature(base64.StdEncoding.EncodeToString(pub), msg, a.Signature); err != nil {
		return AdminFailed("invalid admin signature: %v", err)
	}
	return nil
}
