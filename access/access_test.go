package access_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/capmesh/capmesh/access"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/chphttp"
	"github.com/capmesh/capmesh/jsonrpc"
)

func code(err error) jsonrpc.Code {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je.Code
	}
	if err != nil {
		return 1
	}
	return 0
}

// TestAuthorizeTable is docs/access.md's table of who may do what, per
// principal kind, on a closed and on an open host.
func TestAuthorizeTable(t *testing.T) {
	ops := []access.Op{access.OpPublic, access.OpInvoke, access.OpDescribe, access.OpEvidence, access.OpRegister, access.OpAdminister}
	// One row per kind: the code for each op, closed host then open host.
	want := map[access.Kind][2][6]jsonrpc.Code{
		access.Anonymous: {{0, -32001, -32001, -32001, 0, -32003}, {0, 0, 0, 0, 0, -32003}},
		access.OtherUser: {{0, -32003, -32003, -32003, 0, -32003}, {0, 0, 0, 0, 0, -32003}},
		access.SharedKey: {{0, 0, 0, 0, 0, -32003}, {0, 0, 0, 0, 0, -32003}},
		access.NamedKey:  {{0, 0, 0, 0, 0, -32003}, {0, 0, 0, 0, 0, -32003}},
		access.SameUser:  {{0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0}},
	}
	for k, rows := range want {
		for i, open := range []bool{false, true} {
			p := access.NewPolicy(access.Config{Open: open})
			for j, op := range ops {
				if got := code(p.Authorize(access.Principal{Kind: k}, op)); got != rows[i][j] {
					t.Errorf("%s %s (open=%v): code %d, want %d", k, op, open, got, rows[i][j])
				}
			}
		}
	}
}

func TestAuthenticateKey(t *testing.T) {
	p := access.NewPolicy(access.Config{Keys: &chphttp.Options{SharedKeys: []string{"s"}, NamedKeys: []chphttp.NamedKey{{Name: "alice", Key: "a", Scope: []string{"x.*"}}}}})
	if pr, err := p.AuthenticateKey("a"); err != nil || pr.Kind != access.NamedKey || pr.Name != "alice" || !pr.Verified() || pr.Caller().ID != "alice" || pr.Caller().Scope[0] != "x.*" {
		t.Errorf("named key: %+v, %v", pr, err)
	}
	if pr, err := p.AuthenticateKey("s"); err != nil || pr.Kind != access.SharedKey || pr.Verified() || !pr.Caller().Claimed {
		t.Errorf("shared key: %+v, %v", pr, err)
	}
	for _, k := range []string{"", "wrong", "a "} {
		if _, err := p.AuthenticateKey(k); code(err) != access.CodeUnauthenticated {
			t.Errorf("key %q: %v, want -32001", k, err)
		}
	}
	// A keyless host ignores a key, as the CHP HTTP binding does.
	if pr, err := access.NewPolicy(access.Config{}).AuthenticateKey("anything"); err != nil || pr.Kind != access.Anonymous {
		t.Errorf("keyless: %+v, %v", pr, err)
	}
}

// attestation returns the MetaCaller object of forwarded params.
func attestation(t *testing.T, params json.RawMessage) map[string]any {
	t.Helper()
	var top struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(params, &top); err != nil {
		t.Fatalf("%s: %v", params, err)
	}
	if _, ok := top.Meta[access.MetaKey]; ok {
		t.Errorf("forwarded params still carry the caller's key: %s", params)
	}
	var a map[string]any
	if err := json.Unmarshal(top.Meta[access.MetaCaller], &a); err != nil {
		t.Fatalf("no attestation in %s", params)
	}
	return a
}

func TestForward(t *testing.T) {
	ctx := access.WithPrincipal(context.Background(), access.Principal{Kind: access.Anonymous, Door: "tcp"})
	// A forged attestation and a key are replaced and removed; other
	// _meta members stay.
	out, err := access.Forward(ctx, json.RawMessage(`{"v":1,"_meta":{"correlation_id":"c","chp_key":"k","io.github.capmesh.caller":{"kind":"same_user","uid":0}}}`), "n1")
	if err != nil {
		t.Fatal(err)
	}
	if a := attestation(t, out); a["kind"] != "anonymous" || a["door"] != "tcp" || a["via"] != "n1" || a["uid"] != nil {
		t.Errorf("attestation %v", a)
	}
	var m map[string]any
	_ = json.Unmarshal(out, &m)
	if m["v"] != 1.0 || m["_meta"].(map[string]any)["correlation_id"] != "c" {
		t.Errorf("params changed beyond _meta: %s", out)
	}
	// Absent params get an object to carry the attestation.
	for _, p := range []string{"", "null", " "} {
		out, err := access.Forward(ctx, json.RawMessage(p), "n1")
		if err != nil || attestation(t, out)["kind"] != "anonymous" {
			t.Errorf("params %q: %s, %v", p, out, err)
		}
	}
	// Array params cannot carry it: refused for anyone but the same user.
	if _, err := access.Forward(ctx, json.RawMessage(`[1,2]`), "n1"); code(err) != jsonrpc.InvalidParams {
		t.Errorf("array params for an anonymous caller: %v", err)
	}
	same := access.WithPrincipal(context.Background(), access.Principal{Kind: access.SameUser, UID: 7, HasUID: true})
	if out, err := access.Forward(same, json.RawMessage(`[1,2]`), "n1"); err != nil || string(out) != `[1,2]` {
		t.Errorf("array params for the same user: %s, %v", out, err)
	}
	// A named key keeps its name and scope.
	named := access.WithPrincipal(context.Background(), access.Principal{Kind: access.NamedKey, Name: "alice", Scope: []string{"x.*"}, Door: "http"})
	out, err = access.Forward(named, json.RawMessage(`{}`), "n1")
	if a := attestation(t, out); err != nil || a["kind"] != "named_key" || a["id"] != "alice" || a["scope"].([]any)[0] != "x.*" {
		t.Errorf("named key attestation %v, %v", a, err)
	}
}

// serveCheck serves one method that runs Check(op) and reports the
// principal it established, on a Unix socket and on TCP.
func serveCheck(t *testing.T, p *access.Policy, op access.Op) (unixPath, tcpAddr string) {
	t.Helper()
	h := jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		ctx, err := p.Check(ctx, op, req.Params)
		if err != nil {
			return nil, err
		}
		pr := access.Resolve(ctx, p.UID())
		c, _ := boundary.CallerFromContext(ctx)
		out := map[string]any{"kind": pr.Kind.String(), "via": pr.Via, "uid": pr.UID, "has_uid": pr.HasUID}
		if c != nil {
			out["caller"] = c.ID
			out["claimed"] = c.Claimed
		}
		return out, nil
	})
	srv := jsonrpc.NewServer(jsonrpc.Map{"who.am_i": h}, nil)
	dir := t.TempDir()
	ul, err := net.Listen("unix", filepath.Join(dir, "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	for _, l := range []net.Listener{ul, tl} {
		go func() { _ = srv.Serve(ctx, l); done <- struct{}{} }()
	}
	t.Cleanup(func() {
		cancel()
		sctx, c2 := context.WithTimeout(context.Background(), 30*time.Second)
		defer c2()
		_ = srv.Shutdown(sctx)
		<-done
		<-done
	})
	return ul.Addr().String(), tl.Addr().String()
}

func whoAmI(t *testing.T, network, addr string, params any) (map[string]any, error) {
	t.Helper()
	c, err := jsonrpc.Dial(context.Background(), network, addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out map[string]any
	err = c.Call(context.Background(), "who.am_i", params, &out)
	return out, err
}

// TestCheckBelievesOnlyTheSameUser: an attestation in _meta is believed
// from a Unix peer of the host's own uid (a node of its user) and ignored
// from anyone else; a key in _meta names the caller on TCP, a wrong one
// is refused, and the host's own user stays itself with a valid key.
func TestCheckBelievesOnlyTheSameUser(t *testing.T) {
	uid := uint32(os.Getuid())
	p := access.NewPolicy(access.Config{UID: uid, Keys: &chphttp.Options{NamedKeys: []chphttp.NamedKey{{Name: "alice", Key: "a"}}}})
	sock, tcp := serveCheck(t, p, access.OpInvoke)
	att := func(kind string) map[string]any {
		return map[string]any{"_meta": map[string]any{access.MetaCaller: map[string]any{"kind": kind, "id": "bob", "uid": 4242, "door": "tcp", "via": "n1"}}}
	}
	out, err := whoAmI(t, "unix", sock, nil)
	if err != nil || out["kind"] != "same_user" || out["has_uid"] != true {
		t.Errorf("plain Unix peer: %v, %v", out, err)
	}
	out, err = whoAmI(t, "unix", sock, att("named_key"))
	if err != nil || out["kind"] != "named_key" || out["caller"] != "bob" || out["via"] != "n1" {
		t.Errorf("attested by a same-user node: %v, %v", out, err)
	}
	out, err = whoAmI(t, "unix", sock, att("other_user"))
	if code(err) != access.CodeForbidden {
		t.Errorf("attested other user on a closed host: %v, %v", out, err)
	}
	if _, err = whoAmI(t, "unix", sock, att("anonymous")); code(err) != access.CodeUnauthenticated {
		t.Errorf("attested anonymous caller on a closed host: %v", err)
	}
	if _, err = whoAmI(t, "tcp", tcp, att("same_user")); code(err) != access.CodeUnauthenticated {
		t.Errorf("attestation over TCP was believed: %v", err)
	}
	out, err = whoAmI(t, "tcp", tcp, map[string]any{"_meta": map[string]any{access.MetaKey: "a"}})
	if err != nil || out["kind"] != "named_key" || out["caller"] != "alice" || out["claimed"] != false {
		t.Errorf("key over TCP: %v, %v", out, err)
	}
	if _, err = whoAmI(t, "tcp", tcp, map[string]any{"_meta": map[string]any{access.MetaKey: "nope"}}); code(err) != access.CodeUnauthenticated {
		t.Errorf("wrong key over TCP: %v", err)
	}
	if _, err = whoAmI(t, "unix", sock, map[string]any{"_meta": map[string]any{access.MetaKey: "nope"}}); code(err) != access.CodeUnauthenticated {
		t.Errorf("wrong key from the same user: %v", err)
	}
	out, err = whoAmI(t, "unix", sock, map[string]any{"_meta": map[string]any{access.MetaKey: "a"}})
	if err != nil || out["kind"] != "same_user" {
		t.Errorf("valid key from the same user: %v, %v", out, err)
	}
}

// FuzzCheck: whatever params carry, Check and Forward answer (no panic),
// and Forward's output is a JSON object carrying an attestation, or a
// refusal.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{}`, `[1]`, `null`, `{"_meta":{"chp_key":"k"}}`, `{"_meta":{"chp_key":1}}`, `{"_meta":[]}`,
		`{"_meta":{"io.github.capmesh.caller":{"kind":"named_key","id":"x","scope":["a.*"]}}}`, `{"\u005fmeta":{"chp_key":"k"}}`, `{"a":"\\"}`} {
		f.Add([]byte(s))
	}
	p := access.NewPolicy(access.Config{Keys: &chphttp.Options{SharedKeys: []string{"k"}}})
	ctx := access.WithPrincipal(context.Background(), access.Principal{Kind: access.Anonymous, Door: "tcp"})
	f.Fuzz(func(t *testing.T, params []byte) {
		_, _ = p.Check(ctx, access.OpInvoke, params)
		out, err := access.Forward(ctx, params, "n")
		if err != nil {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(out, &m) != nil {
			t.Fatalf("Forward(%q) = %q: not an object", params, out)
		}
		attestation(t, out)
	})
}
