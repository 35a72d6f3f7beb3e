package signed

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/internal/pyjson"
	"github.com/capmesh/capmesh/registry/internal/refusal"
)

func newKey(t *testing.T) (string, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(pub), priv
}

func sign(priv ed25519.PrivateKey, msg []byte) string {
	return base64.StdEncoding.EncodeToString(ed25519.Sign(priv, msg))
}

// code is err's refusal word and HTTP status.
func code(t *testing.T, err error) (string, int) {
	t.Helper()
	var re *refusal.Error
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want a refusal", err)
	}
	return re.Code, re.Status
}

// TestDeleteWindow: a DELETE envelope is accepted signed up to
// DeleteWindow either side of now, refused one second past it, and
// refused when it is signed by another key.
func TestDeleteWindow(t *testing.T) {
	key, priv := newKey(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		off  time.Duration
		word string
	}{{-DeleteWindow, ""}, {DeleteWindow, ""}, {-DeleteWindow - time.Second, "signed_at_outside_window"}, {DeleteWindow + time.Second, "signed_at_outside_window"}} {
		at := descriptor.TimeOf(now.Add(c.off)).String()
		ts, err := Delete(key, "", at, sign(priv, []byte("delete-agent|v1|"+key+"|"+at)), now)
		if c.word == "" {
			if err != nil || !ts.Instant().Equal(now.Add(c.off)) {
				t.Errorf("offset %s: %v, %v", c.off, ts, err)
			}
			continue
		}
		if w, status := code(t, err); w != c.word || status != 401 {
			t.Errorf("offset %s: %s %d, want %s 401", c.off, w, status, c.word)
		}
	}
	_, other := newKey(t)
	at := descriptor.TimeOf(now).String()
	_, err := Delete(key, "v1", at, sign(other, []byte("delete-agent|v1|"+key+"|"+at)), now)
	if w, _ := code(t, err); w != descriptor.CodeInvalidSignature {
		t.Errorf("another key's signature: %s", w)
	}
	_, err = Delete(key, "v1", "yesterday", "x", now)
	if w, status := code(t, err); w != "invalid_signed_at" || status != 400 {
		t.Errorf("unparsable signed_at: %s %d", w, status)
	}
}

// TestNodeRequest: a node-signed body verifies over PY_JSON of the body
// without "signature" and yields its nonce; a changed member, a missing
// nonce or a stale timestamp is node_auth_failed.
func TestNodeRequest(t *testing.T) {
	key, priv := newKey(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	skew := 5 * time.Minute
	body := func(at time.Time) map[string]any {
		o := map[string]any{"node_public_key": key, "timestamp": descriptor.TimeOf(at).String(), "nonce": "n1", "hours": 24}
		msg, err := pyjson.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		o["signature"] = sign(priv, msg)
		return o
	}
	if nonce, err := NodeRequest(body(now), key, now, skew); err != nil || nonce != "n1" {
		t.Fatalf("signed request: %q, %v", nonce, err)
	}
	changed := body(now)
	changed["hours"] = 25
	stale := body(now.Add(-skew - time.Second))
	noNonce := body(now)
	delete(noNonce, "nonce")
	for name, o := range map[string]map[string]any{"changed": changed, "stale": stale, "no nonce": noNonce} {
		if _, err := NodeRequest(o, key, now, skew); err == nil {
			t.Errorf("%s: accepted", name)
		} else if w, status := code(t, err); w != "node_auth_failed" || status != 401 {
			t.Errorf("%s: %s %d", name, w, status)
		}
	}
}

// TestCheckAdmin: an operator's signature verifies over PY_JSON of
// {body, key_id, nonce, timestamp}; an unknown key id or another body is
// admin_auth_failed.
func TestCheckAdmin(t *testing.T) {
	_, priv := newKey(t)
	keys := map[string]ed25519.PublicKey{"op": priv.Public().(ed25519.PublicKey)}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	body := map[string]any{"cert_id": "c1"}
	a := Admin{KeyID: "op", Timestamp: descriptor.TimeOf(now).String(), Nonce: "n"}
	msg, err := pyjson.Marshal(map[string]any{"body": body, "key_id": a.KeyID, "nonce": a.Nonce, "timestamp": a.Timestamp})
	if err != nil {
		t.Fatal(err)
	}
	a.Signature = sign(priv, msg)
	if err := CheckAdmin(keys, a, body, now, time.Minute); err != nil {
		t.Fatalf("signed admin request: %v", err)
	}
	unknown := a
	unknown.KeyID = "other"
	for name, err := range map[string]error{
		"unknown key":  CheckAdmin(keys, unknown, body, now, time.Minute),
		"another body": CheckAdmin(keys, a, map[string]any{"cert_id": "c2"}, now, time.Minute),
		"too old":      CheckAdmin(keys, a, body, now.Add(2*time.Minute), time.Minute),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if w, status := code(t, err); w != "admin_auth_failed" || status != 401 {
			t.Errorf("%s: %s %d", name, w, status)
		}
	}
}
