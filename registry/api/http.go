package api

import (
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

	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/internal/pyjson"
	"github.com/capmesh/capmesh/registry/internal/state"
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
func (n *server) httpHandler() http.Handler {
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
		writeJSON(w, 200, c.Object(true))
	})
	mux.HandleFunc("GET /genesis", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, n.Genesis()) })
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
	e := registry.AsError(err)
	details := map[string]any{}
	for k, v := range e.Details {
		details[k] = v
	}
	rid := r.Header.Get("X-Request-ID")
	if rid == "" {
		rid = state.NewUUID()
	}
	writeJSON(w, e.Status, map[string]any{"error": map[string]any{"code": e.Code, "message": e.Message, "details": details, "request_id": rid}})
}

// readObject reads a JSON object body (400 invalid_json / invalid_json_object).
func readObject(r *http.Request) (map[string]any, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, registry.Refuse(descriptor.CodeInvalidJSON, "cannot read body: %v", err)
	}
	if len(b) > maxBody {
		return nil, registry.RefuseWithStatus("payload_too_large", 413, -32600, "body exceeds %d bytes", maxBody)
	}
	v, err := pyjson.Decode(b)
	if err != nil {
		return nil, registry.Refuse(descriptor.CodeInvalidJSON, "body is not valid JSON: %v", err)
	}
	o, ok := v.(map[string]any)
	if !ok {
		return nil, registry.Refuse(descriptor.CodeInvalidJSONObject, "body must be a JSON object")
	}
	return o, nil
}

func (n *server) httpRegister(w http.ResponseWriter, r *http.Request) {
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
	// The registry judges where the request came from (a descriptor from
	// another machine may not name a local-only endpoint).
	ctx := jsonrpc.ContextWithPeer(r.Context(), jsonrpc.Peer{Transport: "http", Addr: r.RemoteAddr})
	if _, err := n.Register(ctx, d); err != nil {
		writeErr(w, r, err)
		return
	}
	writeJSON(w, 200, map[string]any{"status": "registered", "expires_at": d.ExpiresAt.IsoFormat()})
}

func (n *server) httpList(w http.ResponseWriter, r *http.Request) {
	capability := r.URL.Query().Get("capability")
	wires := n.DescriptorWires(capability)
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
			writeErr(w, r, registry.Refuse(registry.CodeWordInvalidParams, "capability: %v", err))
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

func (n *server) httpGet(w http.ResponseWriter, r *http.Request) {
	key := pathKey(r)
	e, ok := n.Get(key)
	if !ok || len(e.Descriptor) == 0 || !e.Trust.Trusted {
		writeErr(w, r, registry.Refuse(registry.CodeWordNotRegistered, "agent not registered"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	_, _ = w.Write(append(append(make([]byte, 0, len(e.Descriptor)+1), e.Descriptor...), '\n'))
}

func (n *server) httpDelete(w http.ResponseWriter, r *http.Request) {
	o, err := readObject(r)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	sig, _ := o["signature"].(string)
	signedAt, _ := o["signed_at"].(string)
	version, _ := o["version"].(string)
	if err := n.DeleteSigned(r.Context(), pathKey(r), version, signedAt, sig); err != nil {
		writeErr(w, r, err)
		return
	}
	writeJSON(w, 200, map[string]any{"status": "deregistered"})
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

func (n *server) httpJoin(w http.ResponseWriter, r *http.Request) {
	o, err := readObject(r)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	key, _ := o["node_public_key"].(string)
	token, _ := o["invite_token"].(string)
	hours, err := intField(o, "validity_hours", 168, registry.MaxValidityHours)
	if err != nil {
		writeErr(w, r, registry.RefuseWithStatus("invalid_validity_hours", 400, -32602, "%v", err))
		return
	}
	if key == "" {
		writeErr(w, r, registry.RefuseWithStatus("missing_node_public_key", 400, -32602, "node_public_key required"))
		return
	}
	if token == "" {
		writeErr(w, r, registry.RefuseWithStatus("missing_invite_token", 403, registry.CodeForbidden, "invite_token required"))
		return
	}
	c, err := n.Join(r.Context(), o, key, token, hours)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	writeJSON(w, 201, c.Object(true))
}

func (n *server) httpRenew(w http.ResponseWriter, r *http.Request) {
	o, err := readObject(r)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	certID, _ := o["cert_id"].(string)
	key, _ := o["node_public_key"].(string)
	hours, err := intField(o, "validity_hours", 168, registry.MaxValidityHours)
	if err != nil {
		writeErr(w, r, registry.RefuseWithStatus("invalid_validity_hours", 400, -32602, "%v", err))
		return
	}
	if certID == "" || key == "" {
		writeErr(w, r, registry.RefuseWithStatus("missing_certificate_identity", 400, -32602, "cert_id and node_public_key required"))
		return
	}
	// Present roles (even []) must match the certificate's; absent is nil.
	var roles []string
	if rs, ok := o["roles"].([]any); ok {
		roles = append(make([]string, 0, len(rs)), stringsOf(rs)...)
	}
	c, err := n.Renew(r.Context(), o, certID, key, roles, hours)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	writeJSON(w, 201, c.Object(true))
}

func (n *server) httpHeartbeat(w http.ResponseWriter, r *http.Request) {
	o, err := readObject(r)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	certID, _ := o["cert_id"].(string)
	key, _ := o["node_public_key"].(string)
	if certID == "" || key == "" {
		writeErr(w, r, registry.RefuseWithStatus("missing_certificate_identity", 400, -32602, "cert_id and node_public_key required"))
		return
	}
	now, err := n.NodeHeartbeat(r.Context(), o, certID, key)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	writeJSON(w, 200, map[string]any{"ack": true, "server_time": descriptor.TimeOf(now).IsoFormat()})
}

// adminAuth reads the X-Admin-* headers.
func adminAuth(r *http.Request) registry.AdminAuth {
	return registry.AdminAuth{
		KeyID:     r.Header.Get("X-Admin-Key-Id"),
		Signature: r.Header.Get("X-Admin-Signature"),
		Timestamp: r.Header.Get("X-Admin-Timestamp"),
		Nonce:     r.Header.Get("X-Admin-Nonce"),
	}
}

func (n *server) httpInvite(w http.ResponseWriter, r *http.Request) {
	o, err := readObject(r)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	if err := n.VerifyAdmin(r.Context(), adminAuth(r), o); err != nil {
		writeErr(w, r, err)
		return
	}
	roles := stringsOf(asSlice(o["roles"]))
	maxH, err1 := intField(o, "max_validity_hours", 168, registry.MaxValidityHours)
	expH, err2 := intField(o, "token_expiry_hours", 24, registry.MaxTokenExpiryHours)
	if err := errors.Join(err1, err2); err != nil {
		writeErr(w, r, registry.RefuseWithStatus("invalid_max_validity_hours", 400, -32602, "%v", err))
		return
	}
	tok, exp, err := n.Invite(r.Context(), roles, time.Duration(maxH)*time.Hour, time.Duration(expH)*time.Hour)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	writeJSON(w, 201, map[string]any{"token_id": tok, "expires_at": descriptor.TimeOf(exp).IsoFormat()})
}

func (n *server) httpRevoke(w http.ResponseWriter, r *http.Request) {
	o, err := readObject(r)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	if err := n.VerifyAdmin(r.Context(), adminAuth(r), o); err != nil {
		writeErr(w, r, err)
		return
	}
	certID, _ := o["cert_id"].(string)
	reason, _ := o["reason"].(string)
	if certID == "" {
		writeErr(w, r, registry.RefuseWithStatus("missing_cert_id", 400, -32602, "cert_id required"))
		return
	}
	res, err := n.Revoke(r.Context(), certID, "", reason)
	if err != nil {
		writeErr(w, r, err)
		return
	}
	writeJSON(w, 200, map[string]any{"crl_sequence": res.CRLSequence, "revoked_count": res.RevokedCount})
}
