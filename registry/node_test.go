package registry_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry/api"

	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/internal/pyjson"
	"github.com/capmesh/capmesh/registry/sqlite"
)

// serve starts a real jsonrpc server for a on l and stops it at cleanup.
func serve(t *testing.T, a jsonrpc.Assigner, l net.Listener) {
	t.Helper()
	srv := jsonrpc.NewServer(a, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx, l) }()
	t.Cleanup(func() { cancel(); <-done })
}

func unixListener(t *testing.T, name string) (net.Listener, string) {
	t.Helper()
	dir, err := osMkdirTemp()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { osRemoveAll(dir) })
	p := filepath.Join(dir, name+".sock")
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	return l, p
}

// fakeHost is a provider: identity.get says name; crypto.sign answers;
// crypto.fail answers a JSON-RPC error with an application code.
func fakeHost(t *testing.T, name string) string {
	l, p := unixListener(t, name)
	serve(t, jsonrpc.Map{
		"identity.get": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
			return map[string]string{"primal": name, "version": "1.0.0"}, nil
		}),
		"crypto.sign": jsonrpc.HandlerFunc(func(_ context.Context, r *jsonrpc.Request) (any, error) {
			return map[string]any{"signed_by": name, "params": json.RawMessage(r.Params)}, nil
		}),
		"crypto.fail": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
			return nil, jsonrpc.Errorf(-32042, "key locked").WithData(map[string]string{"why": "hsm"})
		}),
	}, l)
	return p
}

func dialUnix(t *testing.T, p string) *jsonrpc.Client {
	t.Helper()
	c, err := jsonrpc.Dial(context.Background(), "unix", p, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newNode(t *testing.T, cfg registry.Config) *registry.Node {
	t.Helper()
	n, err := registry.NewNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func call(t *testing.T, c jsonrpc.Caller, method string, params any) map[string]any {
	t.Helper()
	var out map[string]any
	if err := c.Call(context.Background(), method, params, &out); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return out
}

func rpcCode(err error) (jsonrpc.Code, string) {
	var e *jsonrpc.Error
	if !errors.As(err, &e) {
		return 0, fmt.Sprint(err)
	}
	var data struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(e.Data, &data)
	return e.Code, data.Code
}

func TestLocalRegistrationDiscoverCallExpire(t *testing.T) {
	// The registry's clock is the test's: the TTL runs out when the test
	// says so, not when a loaded machine happens to be slow.
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	n := newNode(t, registry.Config{LocalTTL: 400 * time.Millisecond, SweepInterval: time.Hour, Now: now})
	l, nodeSock := unixListener(t, "node")
	serve(t, api.RPC(n), l)
	host := fakeHost(t, "beardog")
	c := dialUnix(t, nodeSock)

	reg := call(t, c, "ipc.register", map[string]any{"primal_id": "beardog", "capabilities": []string{"crypto"}, "endpoint": host})
	if reg["virtual_endpoint"] != "/primal/beardog" || reg["registered"] != true {
		t.Fatalf("register result %v", reg)
	}
	disc := call(t, c, "ipc.find_capability", map[string]any{"capability": "crypto"})
	provs := disc["providers"].([]any)
	if len(provs) != 1 || provs[0].(map[string]any)["socket"] != host || provs[0].(map[string]any)["trust"].(map[string]any)["trusted"] != true {
		t.Fatalf("find_capability %v", disc)
	}
	// Exact membership: a prefix or a LIKE pattern finds nothing.
	for _, q := range []string{"cryp", "crypt_", "CRYPTO", "%"} {
		if got := call(t, c, "ipc.discover", map[string]any{"capability": q})["providers"].([]any); len(got) != 0 {
			t.Errorf("discover %q matched %v", q, got)
		}
	}
	// capability.call reaches the provider with args unchanged.
	var res map[string]any
	if err := c.Call(context.Background(), "capability.call", map[string]any{"capability": "crypto", "operation": "sign", "args": map[string]any{"data": "aGk="}}, &res); err != nil {
		t.Fatal(err)
	}
	if res["signed_by"] != "beardog" || res["params"].(map[string]any)["data"] != "aGk=" {
		t.Fatalf("capability.call result %v", res)
	}
	// The provider's error passes through with its code and data.
	err := c.Call(context.Background(), "capability.call", map[string]any{"capability": "crypto", "operation": "fail"}, nil)
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != -32042 || je.Message != "key locked" || !strings.Contains(string(je.Data), "hsm") {
		t.Fatalf("provider error not passed through: %v", err)
	}
	// A domain.op name the node does not own is routed by its domain.
	if err := c.Call(context.Background(), "crypto.sign", map[string]any{"x": 1}, &res); err != nil || res["signed_by"] != "beardog" {
		t.Fatalf("fallback routing: %v %v", err, res)
	}
	// Fallback routing with no provider is an unknown method (-32601) to a
	// caller that did not ask for routing; capability.call says why.
	if code, word := rpcCode(c.Call(context.Background(), "storage.put", nil, nil)); code != jsonrpc.MethodNotFound || word != "no_provider" {
		t.Fatalf("no provider (fallback): %v %s", code, word)
	}
	if code, word := rpcCode(c.Call(context.Background(), "capability.call", map[string]any{"capability": "storage", "operation": "put"}, nil)); code != registry.CodeNotFound || word != "no_provider" {
		t.Fatalf("no provider (capability.call): %v %s", code, word)
	}

	// Heartbeats keep it alive past its TTL...
	for i := 0; i < 4; i++ {
		clock.Add(int64(200 * time.Millisecond))
		call(t, c, "ipc.heartbeat", map[string]any{"name": "beardog"})
	}
	if got := n.Find("crypto", registry.FindOptions{}); len(got) != 1 {
		t.Fatalf("heartbeating host vanished: %v", got)
	}
	// ...and a host that stops without deregistering disappears after it.
	w := call(t, c, "ipc.watch", map[string]any{"since_revision": 0})
	rev := uint64(w["revision"].(float64))
	clock.Add(int64(600 * time.Millisecond))
	if got := call(t, c, "ipc.discover", map[string]any{"capability": "crypto"})["providers"].([]any); len(got) != 0 {
		t.Fatalf("expired host still discoverable: %v", got)
	}
	n.Sweep(context.Background()) // what the sweeper does every SweepInterval
	w = call(t, c, "ipc.watch", map[string]any{"since_revision": rev, "wait_ms": 2000})
	evs := w["events"].([]any)
	if len(evs) != 1 || evs[0].(map[string]any)["kind"] != "expired" || evs[0].(map[string]any)["primal"] != "beardog" {
		t.Fatalf("watch after expiry: %v", w)
	}
}

func TestLocalRegistrationRefusals(t *testing.T) {
	n := newNode(t, registry.Config{})
	l, nodeSock := unixListener(t, "node")
	serve(t, api.RPC(n), l)
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(t, api.RPC(n), tl)
	host := fakeHost(t, "beardog")
	c := dialUnix(t, nodeSock)
	tc, err := jsonrpc.Dial(context.Background(), "tcp", tl.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()

	tests := []struct {
		name   string
		c      jsonrpc.Caller
		params map[string]any
		code   jsonrpc.Code
		word   string
	}{
		{"unsigned over TCP", tc, map[string]any{"name": "beardog", "capabilities": []string{"crypto"}, "endpoint": host}, registry.CodeUnauthorized, "signature_required_for_remote_peer"},
		{"name mismatch", c, map[string]any{"name": "songbird", "capabilities": []string{"crypto"}, "endpoint": host}, registry.CodeForbidden, "identity_mismatch"},
		{"unreachable endpoint", c, map[string]any{"name": "ghost", "capabilities": []string{"x"}, "endpoint": "/nonexistent/ghost.sock"}, registry.CodeForbidden, "identity_probe_failed"},
		{"bad endpoint", c, map[string]any{"name": "x", "endpoint": "ftp://x"}, jsonrpc.InvalidParams, "invalid_params"},
		{"no name", c, map[string]any{"endpoint": host}, jsonrpc.InvalidParams, "invalid_params"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, word := rpcCode(tt.c.Call(context.Background(), "ipc.register", tt.params, nil))
			if code != tt.code || word != tt.word {
				t.Errorf("got %v %q, want %v %q", code, word, tt.code, tt.word)
			}
		})
	}
	if v := n.Version(); v != 0 {
		t.Errorf("refusals changed the registry: version %d", v)
	}
	// Operator methods are refused over TCP.
	if code, _ := rpcCode(tc.Call(context.Background(), "registry.revoke", map[string]any{"node_public_key": "x"}, nil)); code != registry.CodeForbidden {
		t.Errorf("registry.revoke over TCP: %v", code)
	}
}

// genesisNode is a node with an operator key, served over real HTTP.
type genesisNode struct {
	n      *registry.Node
	url    string
	opKey  ed25519.PrivateKey
	client *http.Client
}

func newGenesisNode(t *testing.T, store registry.Store) *genesisNode {
	_, op, _ := ed25519.GenerateKey(nil)
	n := newNode(t, registry.Config{Network: "SAMPLE-NET", Store: store, OperatorKeys: map[string]ed25519.PublicKey{"op": op.Public().(ed25519.PublicKey)}})
	srv := httptest.NewServer(api.HTTPHandler(n))
	t.Cleanup(srv.Close)
	return &genesisNode{n: n, url: srv.URL, opKey: op, client: srv.Client()}
}

func (g *genesisNode) do(t *testing.T, method, path string, body any, hdr http.Header) (int, map[string]any, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, ok := body.([]byte)
		if !ok {
			b, _ = json.Marshal(body)
		}
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, g.url+path, rd)
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out, raw
}

func (g *genesisNode) admin(t *testing.T, path string, body map[string]any) (int, map[string]any) {
	ts := time.Now().UTC().Format("2006-01-02T15:04:05.000000+00:00")
	nonce := fmt.Sprint(time.Now().UnixNano())
	msg, _ := pyjson.Marshal(map[string]any{"body": toGeneric(body), "key_id": "op", "nonce": nonce, "timestamp": ts})
	h := http.Header{}
	h.Set("X-Admin-Key-Id", "op")
	h.Set("X-Admin-Timestamp", ts)
	h.Set("X-Admin-Nonce", nonce)
	h.Set("X-Admin-Signature", base64.StdEncoding.EncodeToString(ed25519.Sign(g.opKey, msg)))
	code, out, _ := g.do(t, "POST", path, body, h)
	return code, out
}

func toGeneric(v any) any {
	b, _ := json.Marshal(v)
	g, _ := pyjson.Decode(b)
	return g
}

func errWord(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func signed(t *testing.T, priv ed25519.PrivateKey, network string, caps []string, reg time.Time, ttl time.Duration) *descriptor.Descriptor {
	t.Helper()
	d := descriptor.New("agent-1", network, priv.Public().(ed25519.PublicKey), caps, descriptor.Endpoint{Host: "127.0.0.1", Port: 7448, Scheme: "tcp"}, reg, ttl)
	if err := d.Sign(priv); err != nil {
		t.Fatal(err)
	}
	return d
}

func wire(d *descriptor.Descriptor) []byte { b, _ := d.MarshalJSON(); return b }

func TestGenesisHTTPAdmissionTrustRevocation(t *testing.T) {
	g := newGenesisNode(t, nil)
	ctx := context.Background()
	_, node, _ := ed25519.GenerateKey(nil)
	nodeKey := base64.StdEncoding.EncodeToString(node.Public().(ed25519.PublicKey))
	now := time.Now()

	// Unenrolled: refused after the signature verified.
	if code, out, _ := g.do(t, "POST", "/agents", wire(signed(t, node, "SAMPLE-NET", []string{"llm:chat"}, now, 10*time.Minute)), nil); code != 403 || errWord(out) != descriptor.CodeNoActiveCertificate {
		t.Fatalf("unenrolled: %d %v", code, out)
	}
	// Enrol through /admin/invite + /join with proof of possession.
	code, inv := g.admin(t, "/admin/invite", map[string]any{"roles": []string{"role:client"}})
	if code != 201 {
		t.Fatalf("invite: %d %v", code, inv)
	}
	join := map[string]any{"node_public_key": nodeKey, "invite_token": inv["token_id"], "timestamp": time.Now().UTC().Format(time.RFC3339Nano), "nonce": "n-1"}
	msg, _ := pyjson.Marshal(toGeneric(join))
	join["signature"] = base64.StdEncoding.EncodeToString(ed25519.Sign(node, msg))
	code, cert, _ := g.do(t, "POST", "/join", join, nil)
	if code != 201 || cert["node_public_key"] != nodeKey || cert["issued_by"] != "na-capmesh" {
		t.Fatalf("join: %d %v", code, cert)
	}
	// The same invite cannot be used twice.
	join["nonce"] = "n-2"
	delete(join, "signature")
	msg, _ = pyjson.Marshal(toGeneric(join))
	join["signature"] = base64.StdEncoding.EncodeToString(ed25519.Sign(node, msg))
	if code, out, _ := g.do(t, "POST", "/join", join, nil); code != 403 || errWord(out) != "invalid_invite_token" {
		t.Fatalf("invite reuse: %d %v", code, out)
	}

	good := signed(t, node, "SAMPLE-NET", []string{"llm:chat", "kb:security"}, now, 10*time.Minute)
	code, out, _ := g.do(t, "POST", "/agents", wire(good), nil)
	if code != 200 || out["status"] != "registered" || !strings.HasSuffix(out["expires_at"].(string), "+00:00") {
		t.Fatalf("register: %d %v", code, out)
	}
	version := g.n.Version()

	_, small, _ := ed25519.GenerateKey(nil)
	smallD := signed(t, small, "SAMPLE-NET", []string{"x"}, now, time.Minute)
	smallD.NodePublicKey = "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	smallD.Signatures[0].Sig = base64.StdEncoding.EncodeToString(append(append([]byte{1}, make([]byte, 31)...), make([]byte, 32)...))
	tampered := signed(t, node, "SAMPLE-NET", []string{"llm:chat"}, now.Add(time.Second), 10*time.Minute)
	tampered.Capabilities = append(tampered.Capabilities, "admin")
	older := signed(t, node, "SAMPLE-NET", []string{"old"}, now.Add(-time.Minute), 10*time.Minute)
	naive := strings.Replace(string(wire(good)), string(good.RegisteredAt.String()), strings.TrimSuffix(good.RegisteredAt.String(), "Z"), 1)
	refusals := []struct {
		name   string
		body   []byte
		status int
		word   string
	}{
		{"tampered", wire(tampered), 401, descriptor.CodeInvalidSignature},
		{"expired", wire(signed(t, node, "SAMPLE-NET", []string{"x"}, now.Add(-20*time.Minute), 10*time.Minute)), 400, descriptor.CodeExpired},
		{"future-dated", wire(signed(t, node, "SAMPLE-NET", []string{"x"}, now.Add(10*time.Minute), 10*time.Minute)), 400, descriptor.CodeNotYetValid},
		{"wrong network", wire(signed(t, node, "OTHER", []string{"x"}, now.Add(time.Second), 10*time.Minute)), 400, descriptor.CodeNetworkMismatch},
		{"small-order key", wire(smallD), 401, descriptor.CodeInvalidSignature},
		{"older (rollback)", wire(older), 409, descriptor.CodeRollback},
		{"naive timestamp", []byte(naive), 422, descriptor.CodeInvalid},
		{"not json", []byte("{"), 400, descriptor.CodeInvalidJSON},
		{"unsigned", []byte(strings.Replace(string(wire(good)), `"signatures":[`, `"signatures":[],"x":[`, 1)), 401, descriptor.CodeSignatureRequired},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			code, out, raw := g.do(t, "POST", "/agents", tt.body, nil)
			if code != tt.status || errWord(out) != tt.word {
				t.Errorf("got %d %s, want %d %s", code, raw, tt.status, tt.word)
			}
		})
	}
	// Re-posting the same descriptor is idempotent, not a new version.
	if code, _, _ := g.do(t, "POST", "/agents", wire(good), nil); code != 200 {
		t.Errorf("idempotent re-post: %d", code)
	}
	if g.n.Version() != version {
		t.Errorf("refused descriptors changed the registry: version %d → %d", version, g.n.Version())
	}

	// Discovery: exact tag, the stored descriptor byte for byte.
	_, list, raw := g.do(t, "GET", "/agents?capability=llm:chat", nil, nil)
	if list["count"].(float64) != 1 || !bytes.Contains(raw, wire(good)) {
		t.Fatalf("GET /agents: %s", raw)
	}
	if _, list, _ := g.do(t, "GET", "/agents?capability=llm_chat", nil, nil); list["count"].(float64) != 0 {
		t.Errorf("LIKE wildcard matched: %v", list)
	}
	urlKey := base64.RawURLEncoding.EncodeToString(node.Public().(ed25519.PublicKey))
	if code, _, _ := g.do(t, "GET", "/agents/"+urlKey, nil, nil); code != 200 {
		t.Errorf("GET by base64url key: %d", code)
	}

	// A watcher waiting on the registry sees the revocation.
	type watchRes struct {
		evs []registry.Event
		err error
	}
	got := make(chan watchRes, 1)
	go func() {
		_, evs, err := g.n.Watch(ctx, version, []string{"llm:chat"}, 5*time.Second)
		got <- watchRes{evs, err}
	}()
	time.Sleep(50 * time.Millisecond)
	code, rv := g.admin(t, "/admin/revoke", map[string]any{"cert_id": cert["cert_id"], "reason": "key_compromise"})
	if code != 200 || rv["crl_sequence"].(float64) != 1 || rv["revoked_count"].(float64) != 1 {
		t.Fatalf("revoke: %d %v", code, rv)
	}
	w := <-got
	if w.err != nil || len(w.evs) != 1 || w.evs[0].Kind != registry.EventRevoked || w.evs[0].Key != nodeKey {
		t.Fatalf("watcher: %+v", w)
	}
	if _, list, _ := g.do(t, "GET", "/agents?capability=llm:chat", nil, nil); list["count"].(float64) != 0 {
		t.Errorf("revoked node still listed: %v", list)
	}
	_, crl, _ := g.do(t, "GET", "/crl", nil, nil)
	if crl["sequence"].(float64) != 1 || len(crl["revoked_certificates"].([]any)) != 1 {
		t.Errorf("crl: %v", crl)
	}
	// key_compromise blocks the key for good, even with a fresh descriptor.
	fresh := signed(t, node, "SAMPLE-NET", []string{"llm:chat"}, time.Now().Add(2*time.Second), 10*time.Minute)
	if code, out, _ := g.do(t, "POST", "/agents", wire(fresh), nil); code != 403 || errWord(out) != descriptor.CodeKeyRevoked {
		t.Errorf("re-register after key_compromise: %d %v", code, out)
	}
}

func TestRestartKeepsState(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "registry.db")
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n1, err := registry.NewNode(registry.Config{Network: "N", Store: st})
	if err != nil {
		t.Fatal(err)
	}
	l, sock := unixListener(t, "node")
	serve(t, api.RPC(n1), l)
	host := fakeHost(t, "beardog")
	call(t, dialUnix(t, sock), "ipc.register", map[string]any{"name": "beardog", "capabilities": []string{"crypto"}, "endpoint": host})
	_, a, _ := ed25519.GenerateKey(nil)
	_, b, _ := ed25519.GenerateKey(nil)
	keyA := base64.StdEncoding.EncodeToString(a.Public().(ed25519.PublicKey))
	keyB := base64.StdEncoding.EncodeToString(b.Public().(ed25519.PublicKey))
	if _, err := n1.Enroll(ctx, keyA, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := n1.Enroll(ctx, keyB, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := n1.Register(ctx, signed(t, a, "N", []string{"llm:chat"}, time.Now(), time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := n1.Revoke(ctx, "", keyB, registry.ReasonSuperseded); err != nil {
		t.Fatal(err)
	}
	v1 := n1.Version()
	auth := n1.AuthorityPublicKey()
	n1.Close()
	st.Close()

	st2, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	n2 := newNode(t, registry.Config{Network: "N", Store: st2})
	if got := n2.Find("crypto", registry.FindOptions{}); len(got) != 1 || got[0].Name != "beardog" {
		t.Errorf("local registration lost: %v", got)
	}
	if got := n2.Find("llm:chat", registry.FindOptions{}); len(got) != 1 || got[0].Key != keyA || !got[0].Trust.Trusted {
		t.Errorf("descriptor or enrolment lost: %+v", got)
	}
	crl, _ := n2.CurrentCRL(ctx)
	if crl.Sequence != 1 || len(crl.Revoked) != 1 {
		t.Errorf("CRL lost: %+v", crl)
	}
	if n2.Version() != v1 || n2.AuthorityPublicKey() != auth {
		t.Errorf("version %d→%d or authority key changed", v1, n2.Version())
	}
	// The rollback watermark survives too: the old descriptor cannot be replayed.
	if _, err := n2.Register(ctx, signed(t, a, "N", []string{"old"}, time.Now().Add(-time.Minute), time.Hour)); err == nil {
		t.Error("rollback accepted after restart")
	}
}
