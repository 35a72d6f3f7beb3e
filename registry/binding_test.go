package registry_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry/api"

	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
)

// otherProcessEnv makes the test binary a one-call JSON-RPC client: a
// process other than the test's, as a hijacker (or a restarted host) is.
const otherProcessEnv = "CAPMESH_REGISTRY_TEST_CALL"

// TestHelperOtherProcess is that client; it does nothing in a normal run.
func TestHelperOtherProcess(t *testing.T) {
	spec := os.Getenv(otherProcessEnv)
	if spec == "" {
		t.Skip("helper process only")
	}
	var in struct {
		Sock, Method string
		Params       map[string]any
	}
	if err := json.Unmarshal([]byte(spec), &in); err != nil {
		t.Fatal(err)
	}
	c, err := jsonrpc.Dial(context.Background(), "unix", in.Sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var res json.RawMessage
	err = c.Call(context.Background(), in.Method, in.Params, &res)
	code, word := rpcCode(err)
	out, _ := json.Marshal(map[string]any{"result": res, "code": code, "word": word})
	os.Stdout.Write(append([]byte("OTHER:"), append(out, '\n')...))
}

// callFromOtherProcess runs one call from a separate process and returns
// its result, or its error's code and word.
func callFromOtherProcess(t *testing.T, sock, method string, params map[string]any) (map[string]any, jsonrpc.Code, string) {
	t.Helper()
	spec, _ := json.Marshal(map[string]any{"Sock": sock, "Method": method, "Params": params})
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperOtherProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), otherProcessEnv+"="+string(spec))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("other process: %v\n%s", err, out)
	}
	_, line, ok := strings.Cut(string(out), "OTHER:")
	if !ok {
		t.Fatalf("other process said nothing:\n%s", out)
	}
	line, _, _ = strings.Cut(line, "\n")
	var r struct {
		Result json.RawMessage
		Code   jsonrpc.Code
		Word   string
	}
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatal(err)
	}
	var res map[string]any
	_ = json.Unmarshal(r.Result, &res)
	return res, r.Code, r.Word
}

// stoppableHost is fakeHost with a stop: keep=true leaves the socket file
// behind (as a killed host does: connection refused), else it is removed
// (no such file).
func stoppableHost(t *testing.T, name string) (path string, stop func(keepFile bool)) {
	t.Helper()
	l, p := unixListener(t, name)
	srv := jsonrpc.NewServer(jsonrpc.Map{
		"identity.get": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
			return map[string]string{"primal": name}, nil
		}),
		"crypto.sign": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
			return map[string]string{"signed_by": p}, nil
		}),
	}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx, l) }()
	var once sync.Once
	stop = func(keep bool) {
		once.Do(func() {
			l.(*net.UnixListener).SetUnlinkOnClose(!keep)
			cancel()
			<-done
			l.Close()
		})
	}
	t.Cleanup(func() { stop(false) })
	return p, stop
}

// TestLocalRegistrationBinding: a local registration belongs to its
// registrant. Another process of the same user cannot re-register the name
// at its own live socket, renew it or remove it; it may take the name over
// once the registered socket is gone, and then the first registrant's
// heartbeats — by token or by name — no longer renew anything (before,
// they kept the hijacker's endpoint alive indefinitely).
func TestLocalRegistrationBinding(t *testing.T) {
	n := newNode(t, registry.Config{})
	l, sock := unixListener(t, "node")
	serve(t, api.RPC(n), l)
	real, stopReal := stoppableHost(t, "beardog")
	other, _ := stoppableHost(t, "beardog")
	c := dialUnix(t, sock)

	reg := call(t, c, "ipc.register", map[string]any{"name": "beardog", "capabilities": []string{"crypto"}, "endpoint": real})
	tok, _ := reg["registration_token"].(string)
	if len(tok) < 40 {
		t.Fatalf("no registration token: %v", reg)
	}
	endpoint := func() string {
		es := n.Find("crypto", registry.FindOptions{})
		if len(es) != 1 {
			return ""
		}
		return strings.TrimPrefix(es[0].Endpoint, "unix://")
	}

	// Another process: no re-registration at its own live socket, no
	// renewal, no removal — with or without a guessed token.
	for _, tc := range []struct {
		method string
		params map[string]any
		code   jsonrpc.Code
		word   string
	}{
		{"ipc.register", map[string]any{"name": "beardog", "capabilities": []string{"crypto"}, "endpoint": other}, registry.CodeConflict, registry.CodeWordNameInUse},
		{"ipc.register", map[string]any{"name": "beardog", "endpoint": other, "registration_token": "guess"}, registry.CodeForbidden, registry.CodeWordNotRegistrant},
		{"ipc.heartbeat", map[string]any{"name": "beardog"}, registry.CodeForbidden, registry.CodeWordNotRegistrant},
		{"ipc.heartbeat", map[string]any{"name": "beardog", "registration_token": "guess"}, registry.CodeForbidden, registry.CodeWordNotRegistrant},
		{"ipc.unregister", map[string]any{"name": "beardog"}, registry.CodeForbidden, registry.CodeWordNotRegistrant},
	} {
		if _, code, word := callFromOtherProcess(t, sock, tc.method, tc.params); code != tc.code || word != tc.word {
			t.Errorf("other process %s %v: %v %q, want %v %q", tc.method, tc.params, code, word, tc.code, tc.word)
		}
	}
	if got := endpoint(); got != real {
		t.Fatalf("registration now at %q, want the registrant's %q", got, real)
	}
	// The registrant renews by token, or by name alone from its own
	// process (what Songbird clients send).
	call(t, c, "ipc.heartbeat", map[string]any{"name": "beardog", "registration_token": tok})
	call(t, c, "ipc.heartbeat", map[string]any{"name": "beardog"})
	// Another process registering the very same endpoint (the host,
	// restarted) is not a hijack.
	if res, code, word := callFromOtherProcess(t, sock, "ipc.register", map[string]any{"name": "beardog", "capabilities": []string{"crypto"}, "endpoint": real}); code != 0 {
		t.Fatalf("same endpoint from another process: %v %q", code, word)
	} else if res["registration_token"] == tok {
		t.Fatal("a re-registration reused the old token")
	}
	if err := c.Call(context.Background(), "ipc.heartbeat", map[string]any{"name": "beardog", "registration_token": tok}, nil); err == nil {
		t.Fatal("the replaced registration's token still renews")
	}
	tok = call(t, c, "ipc.register", map[string]any{"name": "beardog", "capabilities": []string{"crypto"}, "endpoint": real})["registration_token"].(string)

	// The registered host dies (its socket file left behind): now another
	// process may take the name, and the old registrant renews nothing.
	stopReal(true)
	if _, code, word := callFromOtherProcess(t, sock, "ipc.register", map[string]any{"name": "beardog", "capabilities": []string{"crypto"}, "endpoint": other}); code != 0 {
		t.Fatalf("taking over a dead registration: %v %q", code, word)
	}
	if got := endpoint(); got != other {
		t.Fatalf("registration at %q, want the new registrant's %q", got, other)
	}
	for _, p := range []map[string]any{{"name": "beardog", "registration_token": tok}, {"name": "beardog"}} {
		if code, word := rpcCode(c.Call(context.Background(), "ipc.heartbeat", p, nil)); code != registry.CodeForbidden || word != registry.CodeWordNotRegistrant {
			t.Errorf("old registrant's heartbeat %v renewed the new registration: %v %q", p, code, word)
		}
		if code, _ := rpcCode(c.Call(context.Background(), "ipc.unregister", p, nil)); code != registry.CodeForbidden {
			t.Errorf("old registrant's unregister %v: %v", p, code)
		}
	}
	if got := endpoint(); got != other {
		t.Fatalf("registration at %q after the old registrant's attempts", got)
	}
}

// TestRouteDropsGoneProvider: when a call cannot reach a local provider
// because nobody listens on its socket any more (connection refused, or
// the file is gone), the node drops the registration at once and says so
// in the watch stream, instead of listing a dead host as live and trusted
// until its TTL ends.
func TestRouteDropsGoneProvider(t *testing.T) {
	for _, keep := range []bool{true, false} {
		name := map[bool]string{true: "refused", false: "nofile"}[keep]
		t.Run(name, func(t *testing.T) {
			n := newNode(t, registry.Config{LocalTTL: time.Hour})
			l, sock := unixListener(t, "node")
			serve(t, api.RPC(n), l)
			hostSock, stop := stoppableHost(t, "beardog")
			c := dialUnix(t, sock)
			call(t, c, "ipc.register", map[string]any{"name": "beardog", "capabilities": []string{"crypto"}, "endpoint": hostSock})
			rev := n.Version()
			if err := c.Call(context.Background(), "crypto.sign", map[string]any{}, nil); err != nil {
				t.Fatalf("call to the live host: %v", err)
			}
			if n.Version() != rev {
				t.Fatal("a successful call changed the registry")
			}

			stop(keep)
			if code, _ := rpcCode(c.Call(context.Background(), "crypto.sign", map[string]any{}, nil)); code != registry.CodeUnavailable {
				t.Fatalf("call to the stopped host: %v, want %v", code, registry.CodeUnavailable)
			}
			if got := n.Find("crypto", registry.FindOptions{}); len(got) != 0 {
				t.Fatalf("the stopped host is still listed: %v", got)
			}
			w := call(t, c, "ipc.watch", map[string]any{"since_revision": rev})
			evs, _ := w["events"].([]any)
			if len(evs) != 1 {
				t.Fatalf("watch: %v", w)
			}
			ev := evs[0].(map[string]any)
			if ev["kind"] != registry.EventDeregistered || ev["primal"] != "beardog" || !strings.Contains(ev["reason"].(string), "endpoint gone") {
				t.Fatalf("watch event %v", ev)
			}
		})
	}
}
