package registry

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/internal/pyjson"
)

// maxBody bounds an HTTP request body.
const maxBody = 1 << 20

// HTTPRoutes lists the path patterns a server must route to HTTPHandler
// when it mounts it beside other handlers on one mux (a trailing "/"
// covers a subtree). The handler's GET /health (the reference NA's) is not
// listed: on a capmesh host /health belongs to the CHP binding.
func HTTPRoutes() []string {
	return []string{"/agents", "/agents/", "/crl", "/genesis", "/policy", "/healthz", "/join", "/renew", "/heartbeat", "/admin/"}
}

// HTTPHandler returns the Genesis-Mesh Network-Authority HTTP surface, so
// that an unmodified Genesis-Mesh node can enrol, register and discover
// against capmesh: POST /agents, GET /agents[?capability=], GET|DELETE
// /agents/{key}, GET /crl, POST /join, POST /renew, POST /heartbeat,
// POST /admin/invite, POST /admin/revoke, GET /genesis, GET /policy,
// GET /healthz.
// Writes are rate-limited per client IP (Config.RateLimits): over the
// limit, 429 rate_limit_exceeded with Retry-After.
// Bodies are written as the reference's Flask does (sorted keys, no
// spaces, ASCII only); errors as {"error":{"code","message","details",
// "request_id"}}.
func (n *Node) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /agents", limited(n.limits.agents, n.httpRegister))
	mux.HandleFunc("GET /agents", n.httpList)
	mux.HandleFunc("GET /agents/{key...}", n.httpGet)
	mux.HandleFunc("DELETE /agents/{key...}", limited(n.limits.agents, n.httpDelete))
	mux.HandleFunc("GET /crl", func(w http.ResponseWriter, r *http.Request) {
		c, err := n.CurrentCRL(r.Context())
		if err != nil {
			writeErr(w, r, err)
			return
		}
		writeJSON(w, 200, c.object(true))
	})
	mux.HandleFunc("GET /genesis", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, n.trust.genesis) })
	mux.HandleFunc("GET /policy", func(w http.ResponseWriter, r *http.Request) {
		p, err := n.PolicyManifest(r.Context())
		if err != nil {
			writeErr(w, r, err)
			return
		}
		writeJSON(w, 200, p)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, map[string]any{"status": "ok"}) })
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"status": "healthy", "network": n.cfg.Network, "version": "v1"})
	})
	mux.HandleFunc("POST /join", limited(n.limits.join, n.httpJoin))
	mux.HandleFunc("POST /renew", limited(n.limits.join, n.httpRenew))
	mux.HandleFunc("POST /heartbeat", limited(n.limits.join, n.httpHeartbeat))
	mux.HandleFunc("POST /admin/invite", limited(n.limits.admin, n.httpInvite))
	mux.HandleFunc("POST /admin/revoke", limited(n.limits.admin, n.httpRevoke))
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := pyjson.Marshal(v)
	if err != nil {
		status = 500
		b = []byte(`{"error":{"code":"internal_server_error","details":{},"message":"Internal server error","request_id":""}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeErr(w http.ResponseWriter, r *http.Request, err error) {
	e := asError(err)
	details := map[string]any{}
	for k, v := range e.Details {
		details[k] = v
	}
	rid := r.Header.Get("X-Request-ID")
	if rid == "" {
		rid = newUUID()
	}
	writeJSON(w, e.Status, map[string]any{"error": map[string]any{"code": e.Code, "message": e.Message, "details": details, "request_id": rid}})
}

// readObject reads a JSON object body (400 invalid_json / invalid_json_object).
func readObject(r *http.Request) (map[string]any, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, refuse(descriptor.CodeInvalidJSON, "cannot read body: %v", err)
	}
	if len(b) > maxBody {
		return nil, withStatus("payload_too_large", 413, -32600, "body exceeds %d bytes", maxBody)
	}
	v, err := pyjson.Decode(b)
	if err != nil {
		return nil, refuse(descriptor.CodeInvalidJSON, "body is not valid JSON: %v", err)
	}
	o, ok := v.(map[string]any)
	if !ok {
		return nil, refuse(descriptor.CodeInvalidJSONObject, "body must be a JSON object")
	}
	return o, nil
}

func (n *Node) httpRegister(w http.ResponseWriter, r *http.Request) {
	o, err := readObject(r)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	d, err := descriptor.FromObject(o)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	if _, err := n.Register(r.Context(), d); err != nil {
		writeErr(w, r, err)
		return
	}
	writeJSON(w, 200, map[string]any{"status": "registered", "expires_at": d.ExpiresAt.IsoFormat()})
}

func (n *Node) httpList(w http.ResponseWriter, r *http.Request) {
	capability := r.URL.Query().Get("capability")
	wires := n.descriptorWires(capability)
	// {"agents":[…],"capability":…,"count":n}: the members in sorted order
	// and each agent its stored genesis-canonical wire form, so the body is
	// byte for byte what encoding the whole tree would give.
	size := 64 + len(capability)
	for _, d := range wires {
		size += len(d) + 1
	}
	b := make([]byte, 0, size)
	b = append(b, `{"agents":[`...)
	for i, d := range wires {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, d...)
	}
	b = append(b, `],"capability":`...)
	if capability == "" {
		b = append(b, "null"...)
	} else {
		cb, err := pyjson.Marshal(capability)
		if err != nil {
			writeErr(w, r, refuse(CodeWordInvalidParams, "capability: %v", err))
			return
		}
		b = append(b, cb...)
	}
	b = append(b, `,"count":`...)
	b = strconv.AppendInt(b, int64(len(wires)), 10)
	b = append(b, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	_, _ = w.Write(b)
}

// pathKey accepts the key standard-base64 (percent-decoded by the mux) or
// base64url, so keys starting with "/" (the reference's 308 bug) work.
func pathKey(r *http.Request) string {
	k := r.PathValue("key")
	if dec, err := url.PathUnescape(k); err == nil {
		k = dec
	}
	// A key whose base64url form has no '-' or '_' (about one in four) is
	// also unpadded standard base64: decode every URL-alphabet form.
	if raw, err := base64.RawURLEncoding.Strict().DecodeString(strings.TrimRight(k, "=")); err == nil && len(raw) == ed25519.PublicKeySize {
		return base64.StdEncoding.EncodeToString(raw)
	}
	return k
}

func (n *Node) httpGet(w http.ResponseWriter, r *http.Request) {
	key := pathKey(r)
	e, ok := n.Get(key)
	if !ok || len(e.Descriptor) == 0 || !e.Trust.Trusted {
		writeErr(w, r, refuse(CodeWordNotRegistered, "agent not registered"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	_, _ = w.Write(append(append(make([]byte, 0, len(e.Descriptor)+1), e.Descriptor...), '\n'))
}

func (n *Node) httpDelete(w http.ResponseWriter, r *http.Request) {
	key := pathKey(r)
	o, err := readObject(r)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	sig, _ := o["signature"].(string)
	signedAt, _ := o["signed_at"].(string)
	version, _ := o["version"].(string)
	if version == "" {
		version = "v1"
	}
	if sig == "" || signedAt == "" {
		writeErr(w, r, withStatus("delete_signature_required", 401, CodeUnauthorized, "signature and signed_at required"))
		return
	}
	ts, err := descriptor.ParseTime(signedAt)
	if err != nil {
		writeErr(w, r, withStatus("invalid_signed_at", 400, -32602, "signed_at: %v", err))
		return
	}
	now := n.cfg.Now()
	if d := now.Sub(ts.Instant()); d > 300*time.Second || d < -300*time.Second {
		writeErr(w, r, withStatus("signed_at_outside_window", 401, CodeUnauthorized, "signed_at outside +/-5 min window"))
		return
	}
	if err := descriptor.VerifySignature(key, []byte("delete-agent|"+version+"|"+key+"|"+signedAt), sig); err != nil {
		writeErr(w, r, withStatus(descriptor.CodeInvalidSignature, 401, CodeUnauthorized, "%v", err))
		return
	}
	n.wmu.Lock()
	defer n.wmu.Unlock()
	e, ok := n.entries[key]
	if !ok || e.Source != SourceDescriptor {
		writeErr(w, r, refuse(CodeWordNotRegistered, "agent not registered"))
		return
	}
	if ts.Instant().Before(e.RegisteredAt) {
		writeErr(w, r, refuse(CodeWordReplay, "signed_at %s predates the registration it would delete (%s)", ts, e.RegisteredAt.Format(time.RFC3339Nano)))
		return
	}
	if fresh, err := n.useNonceLocked(r.Context(), "delete:"+key, sig, now.Add(10*time.Minute)); err != nil || !fresh {
		if err == nil {
			err = refuse(CodeWordReplay, "this deletion envelope was already used")
		}
		writeErr(w, r, err)
		return
	}
	if _, err := n.deregisterLocked(r.Context(), key, EventDeregistered, "DELETE /agents"); err != nil {
		writeErr(w, r, err)
		return
	}
	writeJSON(w, 200, map[string]any{"status": "deregistered"})
}

// verifyNodeRequest checks a node-signed request body: signature by
// nodeKey over PY_JSON of the body without "signature", |now − timestamp|
// within the skew, and a fresh nonce in scope.
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

// intField reads an optional integer member k of an HTTP body, in
// [1, max]; def when absent or null.
func intField(o map[string]any, k string, def int, max int64) (int, error) {
	v, ok := o[k]
	if !ok || v == nil {
		return def, nil
	}
	num, ok := v.(json.Number)
	if !ok || strings.ContainsAny(string(num), ".eE") {
		return 0, boundedIntError(k, max)
	}
	i, err := num.Int64()
	if err != nil || i <= 0 || i > max {
		return 0, boundedIntError(k, max)
	}
	return int(i), nil
}

func (n *Node) httpJoin(w http.ResponseWriter, r *http.Request) {
	o, err := readObject(r)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	key, _ := o["node_public_key"].(string)
	token, _ := o["invite_token"].(string)
	hours, err := intField(o, "validity_hours", 168, MaxValidityHours)
	if err != nil {
		writeErr(w, r, withStatus("invalid_validity_hours", 400, -32602, "%v", err))
		return
	}
	if key == "" {
		writeErr(w, r, withStatus("missing_node_public_key", 400, -32602, "node_public_key required"))
		return
	}
	if token == "" {
		writeErr(w, r, withStatus("missing_invite_token", 403, CodeForbidden, "invite_token required"))
		return
	}
	n.wmu.Lock()
	defer n.wmu.Unlock()
	// Proof of possession first: nothing about the key is revealed to a
	// caller who does not hold it.
	if err := n.verifyNodeRequest(r.Context(), o, key, "join:"+key); err != nil {
		writeErr(w, r, err)
		return
	}
	inv, del, err := n.useInviteLocked(r.Context(), token)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	if inv == nil {
		writeErr(w, r, withStatus("invalid_invite_token", 403, CodeForbidden, "invalid, expired, or used invite token"))
		return
	}
	if hours > inv.MaxValidityHours {
		hours = inv.MaxValidityHours
	}
	c, err := n.issueLocked(r.Context(), key, inv.Roles, time.Duration(hours)*time.Hour, inv.MaxValidityHours, []Op{del})
	if err != nil {
		writeErr(w, r, err)
		return
	}
	writeJSON(w, 201, c.object(true))
}

func (n *Node) httpRenew(w http.ResponseWriter, r *http.Request) {
	o, err := readObject(r)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	certID, _ := o["cert_id"].(string)
	key, _ := o["node_public_key"].(string)
	hours, err := intField(o, "validity_hours", 168, MaxValidityHours)
	if err != nil {
		writeErr(w, r, withStatus("invalid_validity_hours", 400, -32602, "%v", err))
		return
	}
	if certID == "" || key == "" {
		writeErr(w, r, withStatus("missing_certificate_identity", 400, -32602, "cert_id and node_public_key required"))
		return
	}
	n.wmu.Lock()
	defer n.wmu.Unlock()
	if err := n.verifyNodeRequest(r.Context(), o, key, "node:"+key); err != nil {
		writeErr(w, r, err)
		return
	}
	cs, ok := n.trust.certs[certID]
	switch {
	case !ok:
		writeErr(w, r, withStatus("certificate_not_found", 403, CodeForbidden, "unknown certificate; cannot renew"))
		return
	case cs.cert.NodePublicKey != key:
		writeErr(w, r, withStatus("certificate_key_mismatch", 403, CodeForbidden, "public key does not match certificate"))
		return
	case cs.Status == "revoked":
		writeErr(w, r, withStatus("certificate_revoked", 403, CodeForbidden, "certificate revoked"))
		return
	case !n.cfg.Now().Before(cs.cert.ExpiresAt.Instant()):
		writeErr(w, r, withStatus("certificate_expired", 403, CodeForbidden, "certificate expired; re-enrollment required"))
		return
	}
	if roles, ok := o["roles"].([]any); ok {
		var rs []string
		for _, x := range roles {
			s, _ := x.(string)
			rs = append(rs, s)
		}
		if !sameSet(rs, cs.cert.Roles) {
			writeErr(w, r, withStatus("renewal_role_change_forbidden", 403, CodeForbidden, "role changes are not permitted during renewal"))
			return
		}
	}
	maxH := cs.MaxValidityHours
	if maxH <= 0 {
		maxH = 168
	}
	if hours > maxH {
		hours = maxH
	}
	c, err := n.issueLocked(r.Context(), key, cs.cert.Roles, time.Duration(hours)*time.Hour, maxH, nil)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	writeJSON(w, 201, c.object(true))
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
	}
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return true
}

func (n *Node) httpHeartbeat(w http.ResponseWriter, r *http.Request) {
	o, err := readObject(r)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	certID, _ := o["cert_id"].(string)
	key, _ := o["node_public_key"].(string)
	if certID == "" || key == "" {
		writeErr(w, r, withStatus("missing_certificate_identity", 400, -32602, "cert_id and node_public_key required"))
		return
	}
	n.wmu.Lock()
	defer n.wmu.Unlock()
	cs, ok := n.trust.certs[certID]
	if !ok || cs.cert.NodePublicKey != key {
		writeErr(w, r, withStatus("certificate_not_found", 403, CodeForbidden, "unknown certificate"))
		return
	}
	if cs.Status == "revoked" {
		writeErr(w, r, withStatus("certificate_revoked", 403, CodeForbidden, "certificate revoked"))
		return
	}
	if err := n.verifyNodeRequest(r.Context(), o, key, "node:"+key); err != nil {
		writeErr(w, r, err)
		return
	}
	writeJSON(w, 200, map[string]any{"ack": true, "server_time": descriptor.TimeOf(n.cfg.Now()).IsoFormat()})
}

// verifyAdmin checks the X-Admin-* headers: an operator key signs PY_JSON
// of {"body","key_id","nonce","timestamp"}.
func (n *Node) verifyAdmin(r *http.Request, body map[string]any) error {
	keyID := r.Header.Get("X-Admin-Key-Id")
	sig := r.Header.Get("X-Admin-Signature")
	ts := r.Header.Get("X-Admin-Timestamp")
	nonce := r.Header.Get("X-Admin-Nonce")
	fail := func(format string, a ...any) error {
		return withStatus("admin_auth_failed", 401, CodeUnauthorized, format, a...)
	}
	if keyID == "" || sig == "" || ts == "" || nonce == "" {
		return fail("missing admin authentication headers")
	}
	pub, ok := n.cfg.OperatorKeys[keyID]
	if !ok {
		return fail("unknown admin key")
	}
	t, err := descriptor.ParseTime(ts)
	if err != nil {
		return fail("invalid admin timestamp: %v", err)
	}
	now := n.cfg.Now()
	if d := now.Sub(t.Instant()); d > n.cfg.Skew || d < -n.cfg.Skew {
		return fail("admin request timestamp too old")
	}
	msg, err := pyjson.Marshal(map[string]any{"body": body, "key_id": keyID, "nonce": nonce, "timestamp": ts})
	if err != nil {
		return fail("%v", err)
	}
	if err := descriptor.VerifySignature(base64.StdEncoding.EncodeToString(pub), msg, sig); err != nil {
		return fail("invalid admin signature: %v", err)
	}
	fresh, err := n.useNonceLocked(r.Context(), "admin:"+keyID, nonce, now.Add(2*n.cfg.Skew))
	if err != nil {
		return err
	}
	if !fresh {
		return fail("admin nonce already used")
	}
	return nil
}

func (n *Node) httpInvite(w http.ResponseWriter, r *http.Request) {
	o, err := readObject(r)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	n.wmu.Lock()
	err = n.verifyAdmin(r, o)
	n.wmu.Unlock()
	if err != nil {
		writeErr(w, r, err)
		return
	}
	var roles []string
	for _, x := range asSlice(o["roles"]) {
		s, _ := x.(string)
		roles = append(roles, s)
	}
	maxH, err1 := intField(o, "max_validity_hours", 168, MaxValidityHours)
	expH, err2 := intField(o, "token_expiry_hours", 24, MaxTokenExpiryHours)
	if err := errors.Join(err1, err2); err != nil {
		writeErr(w, r, withStatus("invalid_max_validity_hours", 400, -32602, "%v", err))
		return
	}
	tok, exp, err := n.Invite(r.Context(), roles, time.Duration(maxH)*time.Hour, time.Duration(expH)*time.Hour)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	writeJSON(w, 201, map[string]any{"token_id": tok, "expires_at": descriptor.TimeOf(exp).IsoFormat()})
}

func (n *Node) httpRevoke(w http.ResponseWriter, r *http.Request) {
	o, err := readObject(r)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	n.wmu.Lock()
	err = n.verifyAdmin(r, o)
	n.wmu.Unlock()
	if err != nil {
		writeErr(w, r, err)
		return
	}
	certID, _ := o["cert_id"].(string)
	reason, _ := o["reason"].(string)
	if certID == "" {
		writeErr(w, r, withStatus("missing_cert_id", 400, -32602, "cert_id required"))
		return
	}
	res, err := n.Revoke(r.Context(), certID, "", reason)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	writeJSON(w, 200, map[string]any{"crl_sequence": res.CRLSequence, "revoked_count": res.RevokedCount})
}
