package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/chphttp"
	"github.com/capmesh/capmesh/dashboard"
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/jsonrpc"
)

// The access matrix: every binding `capmesh server` opens × every kind of
// credential × every operation, each cell asserted (docs/access.md has the
// same table). The node runs in process through Main, exactly as the
// binary does; the "other uid" cells are made by a copy of this test
// binary run as uid 65534 (a real process of another user, so that the
// kernel's SO_PEERCRED says so — it cannot be faked from one process).

// childEnv carries a request to the child process; childUID is whom it runs as.
const (
	childEnv = "CAPMESH_ACCESS_MATRIX_REQUEST"
	childUID = 65534
)

// wreq is one request on the wire: newline JSON-RPC on a stream (Stream
// "unix" or "tcp") or an HTTP request.
type wreq struct {
	Stream string `json:"stream,omitempty"`
	Addr   string `json:"addr,omitempty"`
	Method string `json:"method,omitempty"`
	URL    string `json:"url,omitempty"`
	Key    string `json:"key,omitempty"`
	Body   string `json:"body,omitempty"`
	// FirstLine reads an HTTP answer only up to its first line (an
	// event stream, which does not end).
	FirstLine bool `json:"first_line,omitempty"`
}

// wres is what came back.
type wres struct {
	Status int    `json:"status,omitempty"`
	Body   string `json:"body,omitempty"`
	Err    string `json:"err,omitempty"`
}

// accessMatrixChild runs a request given by the parent and prints the
// result; TestMain calls it in the child process.
func accessMatrixChild() int {
	var r wreq
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &r); err != nil {
		fmt.Println(`{"err":"bad request"}`)
		return 1
	}
	out, _ := json.Marshal(perform(r))
	fmt.Println(string(out))
	return 0
}

func perform(r wreq) wres {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r.Stream != "" {
		var d net.Dialer
		c, err := d.DialContext(ctx, r.Stream, r.Addr)
		if err != nil {
			return wres{Err: err.Error()}
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(c, r.Body+"\n"); err != nil {
			return wres{Err: err.Error()}
		}
		sc := bufio.NewScanner(c)
		sc.Buffer(nil, 16<<20)
		if !sc.Scan() {
			return wres{Err: fmt.Sprintf("no response: %v", sc.Err())}
		}
		return wres{Body: sc.Text()}
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, strings.NewReader(r.Body))
	if err != nil {
		return wres{Err: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	if r.Key != "" {
		req.Header.Set("X-CHP-Key", r.Key)
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := hc.Do(req)
	if err != nil {
		return wres{Err: err.Error()}
	}
	defer res.Body.Close()
	if r.FirstLine {
		line, _ := bufio.NewReader(io.LimitReader(res.Body, 64<<10)).ReadString('\n')
		return wres{Status: res.StatusCode, Body: line}
	}
	b, _ := io.ReadAll(res.Body)
	return wres{Status: res.StatusCode, Body: string(b)}
}

// asOtherUser performs r in a child process running as childUID.
func asOtherUser(t *testing.T, bin string, r wreq) wres {
	t.Helper()
	rb, _ := json.Marshal(r)
	cmd := exec.Command(bin)
	cmd.Dir = "/"
	cmd.Env = []string{childEnv + "=" + string(rb)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: childUID, Gid: childUID}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child as uid %d: %v (%s)", childUID, err, out)
	}
	var res wres
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	return res
}

// childBinary copies this test binary where uid 65534 may run it, or
// returns "" (and why) when the test cannot switch users.
func childBinary(t *testing.T, dir string) (string, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return "", "the other-uid cells need root to run a child as uid 65534 (SO_PEERCRED cannot be faked in process)"
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "matrix-child")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, ""
}

// outcome reduces a response to what the table asserts: "ok", a JSON-RPC
// error code, "denied:<code>" for a processed CHP denial, an HTTP status,
// or "EACCES" for a connection the kernel refused.
func outcome(r wres) string {
	if r.Err != "" {
		if strings.Contains(r.Err, "permission denied") {
			return "EACCES"
		}
		return "err: " + r.Err
	}
	if r.Status != 0 && r.Status != http.StatusOK {
		return strconv.Itoa(r.Status)
	}
	if r.Status == http.StatusOK && strings.HasPrefix(r.Body, "# HELP ") {
		return "ok" // the Prometheus exposition
	}
	if r.Status == http.StatusOK && (strings.HasPrefix(r.Body, "<") || strings.HasPrefix(r.Body, "//") || strings.HasPrefix(r.Body, "retry:")) {
		return "ok" // a dashboard page, fragment or asset
	}
	var m struct {
		Error   *jsonrpc.Error  `json:"error"`
		Result  json.RawMessage `json:"result"`
		Outcome string          `json:"outcome"`
		Denial  json.RawMessage `json:"denial"`
	}
	if err := json.Unmarshal([]byte(r.Body), &m); err != nil {
		return "not JSON: " + r.Body
	}
	if len(m.Result) > 0 && m.Result[0] == '{' {
		// chp.invoke answers an InvocationResult: its outcome counts.
		_ = json.Unmarshal(m.Result, &m)
	}
	denied := func(raw json.RawMessage) string {
		var d struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(raw, &d)
		return "denied:" + d.Code
	}
	switch {
	case m.Error != nil:
		if m.Error.Code == -32040 { // a direct call's processed denial
			var res struct {
				Denial json.RawMessage `json:"denial"`
			}
			_ = json.Unmarshal(m.Error.Data, &res)
			return denied(res.Denial)
		}
		return strconv.Itoa(int(m.Error.Code))
	case m.Outcome == string(chp.OutcomeDenied):
		return denied(m.Denial)
	case m.Outcome != "" && m.Outcome != string(chp.OutcomeSuccess):
		return m.Outcome
	}
	return "ok"
}

// credentials, in the table's column order. A key is presented as
// X-CHP-Key on HTTP and as params._meta.chp_key on a stream.
var matrixCreds = []struct {
	name  string
	key   string
	other bool // made by the child running as another uid
}{
	{"none", "", false},
	{"wrong", "not-a-key", false},
	{"shared", "shared-k", false},
	{"scoped", "scoped-k", false},
	{"named", "alice-k", false},
	{"other_uid", "", true},
	{"same_uid", "", false},
}

// matrix is the table: binding → operation → one outcome per credential,
// in matrixCreds order. On the Unix socket every caller has a uid, so the
// key columns (and "none") are made by another user: the host's own user
// is the same user whatever key it adds. Public methods (discover) never
// read credentials on a stream; the HTTP bridge refuses a wrong
// X-CHP-Key before it dispatches anything.
var matrix = map[string]map[string][7]string{
	"unix": {
		"invoke":     {"-32003", "-32001", "ok", "denied:policy_blocked", "ok", "-32003", "ok"},
		"routed":     {"-32003", "-32001", "ok", "ok", "ok", "-32003", "ok"},
		"describe":   {"-32003", "-32001", "ok", "ok", "ok", "-32003", "ok"},
		"replay":     {"-32003", "-32001", "ok", "ok", "ok", "-32003", "ok"},
		"export":     {"-32003", "-32001", "ok", "ok", "ok", "-32003", "ok"},
		"verify":     {"-32003", "-32001", "ok", "ok", "ok", "-32003", "ok"},
		"head":       {"-32003", "-32001", "ok", "ok", "ok", "-32003", "ok"},
		"register":   {"-32003", "-32001", "-32003", "-32003", "-32003", "-32003", "ok"},
		"drain":      {"-32003", "-32001", "-32003", "-32003", "-32003", "-32003", "-32602"},
		"administer": {"-32003", "-32001", "-32003", "-32003", "-32003", "-32003", "ok"},
		"discover":   {"ok", "ok", "ok", "ok", "ok", "ok", "ok"},
	},
	"tcp": {
		"invoke":     {"-32001", "-32001", "ok", "denied:policy_blocked", "ok", "-32001", "-32001"},
		"routed":     {"-32001", "-32001", "ok", "ok", "ok", "-32001", "-32001"},
		"describe":   {"-32001", "-32001", "ok", "ok", "ok", "-32001", "-32001"},
		"replay":     {"-32001", "-32001", "ok", "ok", "ok", "-32001", "-32001"},
		"export":     {"-32001", "-32001", "ok", "ok", "ok", "-32001", "-32001"},
		"verify":     {"-32001", "-32001", "ok", "ok", "ok", "-32001", "-32001"},
		"head":       {"-32001", "-32001", "ok", "ok", "ok", "-32001", "-32001"},
		"register":   {"-32001", "-32001", "-32001", "-32001", "-32001", "-32001", "-32001"},
		"drain":      {"-32003", "-32001", "-32003", "-32003", "-32003", "-32003", "-32003"},
		"administer": {"-32003", "-32001", "-32003", "-32003", "-32003", "-32003", "-32003"},
		"discover":   {"ok", "ok", "ok", "ok", "ok", "ok", "ok"},
	},
	"http-jsonrpc": {
		"invoke":     {"-32001", "401", "ok", "denied:policy_blocked", "ok", "-32001", "-32001"},
		"routed":     {"-32001", "401", "ok", "ok", "ok", "-32001", "-32001"},
		"describe":   {"-32001", "401", "ok", "ok", "ok", "-32001", "-32001"},
		"replay":     {"-32001", "401", "ok", "ok", "ok", "-32001", "-32001"},
		"export":     {"-32001", "401", "ok", "ok", "ok", "-32001", "-32001"},
		"verify":     {"-32001", "401", "ok", "ok", "ok", "-32001", "-32001"},
		"head":       {"-32001", "401", "ok", "ok", "ok", "-32001", "-32001"},
		"register":   {"-32001", "401", "-32001", "-32001", "-32001", "-32001", "-32001"},
		"drain":      {"-32003", "401", "-32003", "-32003", "-32003", "-32003", "-32003"},
		"administer": {"-32003", "401", "-32003", "-32003", "-32003", "-32003", "-32003"},
		"discover":   {"ok", "401", "ok", "ok", "ok", "ok", "ok"},
	},
	"http-chp": {
		"invoke":   {"401", "401", "ok", "denied:policy_blocked", "ok", "401", "401"},
		"describe": {"401", "401", "ok", "ok", "ok", "401", "401"},
		"replay":   {"401", "401", "ok", "ok", "ok", "401", "401"},
		"export":   {"401", "401", "ok", "ok", "ok", "401", "401"},
		"verify":   {"401", "401", "ok", "ok", "ok", "401", "401"},
		"head":     {"401", "401", "ok", "ok", "ok", "401", "401"},
		"discover": {"ok", "ok", "ok", "ok", "ok", "ok", "ok"},
	},
	// `capmesh chp-fixtures` (the conformance profile the upstream runner
	// is pointed at) serves the same CHP routes with the same keys.
	"chp-fixtures": {
		"invoke":   {"401", "401", "ok", "denied:policy_blocked", "ok", "401", "401"},
		"describe": {"401", "401", "ok", "ok", "ok", "401", "401"},
		"replay":   {"401", "401", "ok", "ok", "ok", "401", "401"},
		"export":   {"401", "401", "ok", "ok", "ok", "401", "401"},
		"verify":   {"401", "401", "ok", "ok", "ok", "401", "401"},
		"head":     {"401", "401", "ok", "ok", "ok", "401", "401"},
		"discover": {"ok", "ok", "ok", "ok", "ok", "ok", "ok"},
	},
	// The Genesis-Mesh registry routes carry their own credentials (a
	// signed descriptor, an operator's signed request), never X-CHP-Key.
	"http-registry": {
		"register":   {"422", "422", "422", "422", "422", "422", "422"},
		"administer": {"401", "401", "401", "401", "401", "401", "401"},
		"discover":   {"ok", "ok", "ok", "ok", "ok", "ok", "ok"},
	},
	// /metrics on a keyed node: key holders only (any key of the node);
	// a keyless node serves it on its loopback listener to all
	// (TestMetricsExposition).
	"http-metrics": {
		"metrics": {"401", "401", "ok", "ok", "ok", "401", "401"},
	},
	// The dashboard (package dashboard, dashboard.Routes): the registry,
	// trust and composition pages are public (what ipc.list and
	// registry.* tell anyone), the evidence timeline is evidence and the
	// audit matrix describe, as on /jsonrpc; a wrong key is a 401 anywhere.
	"http-ui": {
		"ui-root":     {"ok", "401", "ok", "ok", "ok", "ok", "ok"},
		"ui-registry": {"ok", "401", "ok", "ok", "ok", "ok", "ok"},
		"ui-rows":     {"ok", "401", "ok", "ok", "ok", "ok", "ok"},
		"ui-trust":    {"ok", "401", "ok", "ok", "ok", "ok", "ok"},
		"ui-compose":  {"ok", "401", "ok", "ok", "ok", "ok", "ok"},
		"ui-static":   {"ok", "401", "ok", "ok", "ok", "ok", "ok"},
		"ui-login":    {"ok", "401", "ok", "ok", "ok", "ok", "ok"},
		"ui-events":   {"ok", "401", "ok", "ok", "ok", "ok", "ok"},
		"ui-logout":   {"ok", "401", "ok", "ok", "ok", "ok", "ok"},
		// Past the access layer, a sign-in without a key in its form.
		"ui-signin":   {"400", "401", "400", "400", "400", "400", "400"},
		"ui-evidence": {"401", "401", "ok", "ok", "ok", "401", "401"},
		"ui-audit":    {"401", "401", "ok", "ok", "ok", "401", "401"},
	},
}

// uiRequests are the dashboard's cells: one request per route of
// dashboard.Routes (TestAccessMatrixCoversTheDashboard checks that none is
// missing). The event stream is read up to its first line.
var uiRequests = map[string]struct {
	route, method, path string
	firstLine           bool
}{
	"ui-root":     {"GET /ui", "GET", "/ui", false},
	"ui-registry": {"GET /ui/{$}", "GET", "/ui/", false},
	"ui-rows":     {"GET /ui/registry/rows", "GET", "/ui/registry/rows", false},
	"ui-events":   {"GET /ui/events", "GET", "/ui/events", true},
	"ui-trust":    {"GET /ui/trust", "GET", "/ui/trust", false},
	"ui-compose":  {"GET /ui/compose", "GET", "/ui/compose", false},
	"ui-evidence": {"GET /ui/evidence", "GET", "/ui/evidence?corr=corr-matrix", false},
	"ui-audit":    {"GET /ui/audit", "GET", "/ui/audit", false},
	"ui-login":    {"GET /ui/login", "GET", "/ui/login", false},
	"ui-signin":   {"POST /ui/login", "POST", "/ui/login", false},
	"ui-logout":   {"POST /ui/logout", "POST", "/ui/logout", false},
	"ui-static":   {"GET /ui/static/{file}", "GET", "/ui/static/app.js", false},
}

// TestAccessMatrixCoversTheDashboard fails for a dashboard route without
// a cell in the matrix.
func TestAccessMatrixCoversTheDashboard(t *testing.T) {
	covered := map[string]bool{}
	for op, u := range uiRequests {
		if _, ok := matrix["http-ui"][op]; !ok {
			t.Errorf("%s has no row in the matrix", op)
		}
		covered[u.route] = true
	}
	for _, r := range dashboard.Routes() {
		if !covered[r.Pattern] {
			t.Errorf("dashboard route %q has no cell in the access matrix", r.Pattern)
		}
	}
}

// matrixNode is a running keyed node (capmesh server --chp-fixtures with
// a Unix socket open to other users, --port and --http) and a target host
// that serves only its Unix socket, registered with the node.
type matrixNode struct {
	dir, sock, tcp, http, targetSock, fixtures string
	target, other                              *host.Host
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startNode runs `capmesh server` in process with args until the test
// ends, and returns once its socket answers.
func startNode(t *testing.T, sock string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr strings.Builder
	go func() {
		done <- Main(ctx, append([]string{"server", "--memory", "--socket", sock}, args...), strings.NewReader(""), io.Discard, &lockedWriter{w: &stderr})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("node did not stop within 30s")
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := jsonrpc.Dial(ctx, "unix", sock, nil); err == nil {
			err = c.Call(ctx, "health.liveness", nil, nil)
			c.Close()
			if err == nil {
				return
			}
		}
		select {
		case code := <-done:
			t.Fatalf("node exited %d before it answered", code)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("node not ready within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startFixtures runs `capmesh chp-fixtures --http addr args…` in process
// until the test ends, and returns once it answers GET /health.
func startFixtures(t *testing.T, addr string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, append([]string{"chp-fixtures", "--http", addr}, args...), strings.NewReader(""), io.Discard, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("chp-fixtures did not stop within 30s")
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for outcome(perform(wreq{Method: "GET", URL: "http://" + addr + "/health"})) != "ok" {
		select {
		case code := <-done:
			t.Fatalf("chp-fixtures exited %d before it answered", code)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("chp-fixtures not ready within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startTarget serves a host named name with <name>.echo, recording its
// callers' evidence, on a Unix socket in dir (and TCP when tcp), and
// registers it with the node on nodeSock.
func startTarget(t *testing.T, dir, name, nodeSock string, tcp bool) *host.Host {
	t.Helper()
	cfg := &host.Config{Socket: filepath.Join(dir, name+".sock"), Ephemeral: true, NoAnnounce: true, CHPHTTP: &chphttp.Options{}, Logger: discardLogger()}
	if tcp {
		cfg.TCP = "127.0.0.1:0"
	}
	h, err := host.New(host.Info{Name: name, Version: "1.0.0", Domain: name}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Register(h, name+".echo", func(_ context.Context, in struct {
		Value string `json:"value"`
	}) (string, error) {
		return in.Value, nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- h.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-errc })
	select {
	case <-h.Ready():
	case err := <-errc:
		t.Fatalf("target: %v", err)
	}
	c, err := jsonrpc.Dial(ctx, "unix", nodeSock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Call(ctx, "ipc.register", map[string]any{"name": name, "capabilities": []string{name + ".echo"}, "endpoint": "unix://" + h.Addr("unix")}, nil); err != nil {
		t.Fatalf("registering %s: %v", name, err)
	}
	return h
}

// matrixEnv sets up the keyed node of the matrix.
func matrixEnv(t *testing.T) *matrixNode {
	// Other users may reach the node's socket (0666 in a 0755 directory
	// of its own: t.TempDir's parent is private), so that the kernel lets
	// uid 65534 connect and SO_PEERCRED decides. With the default 0600
	// socket the connect itself fails (EACCES).
	dir, err := os.MkdirTemp("", "capmesh-access-matrix-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", dir)
	t.Setenv("FAMILY_ID", "")
	t.Setenv("NODE_ID", "")
	t.Setenv("CAPMESH_SOCKET_MODE", "0666")
	t.Setenv("CHP_HOST_API_KEY", "shared-k")
	t.Setenv("CHP_HOST_API_KEYS", "alice:alice-k,scoped:scoped-k:target.*")
	n := &matrixNode{dir: dir, sock: filepath.Join(dir, "capmesh.sock"), tcp: freePort(t), http: freePort(t)}
	_, port, _ := net.SplitHostPort(n.tcp)
	// The target is registered once, without heartbeats: a TTL longer than
	// any run keeps it listed however slow the machine (under -race on a
	// loaded box the matrix has taken over 90 s, the default TTL).
	startNode(t, n.sock, "--chp-fixtures", "--port", port, "--http", n.http, "--local-ttl", "1h")
	n.target = startTarget(t, dir, "target", n.sock, false)
	n.targetSock = n.target.Addr("unix")
	n.other = startTarget(t, dir, "other", n.sock, false)

	n.fixtures = freePort(t)
	startFixtures(t, n.fixtures, "--key", "shared-k", "--keys", "alice:alice-k,scoped:scoped-k:target.*")
	if res := perform(wreq{Method: "POST", URL: "http://" + n.fixtures + "/invoke", Key: "shared-k",
		Body: `{"capability_id":"conformance.echo","payload":{"value":"m"},"correlation":{"correlation_id":"corr-matrix"}}`}); outcome(res) != "ok" {
		t.Fatalf("chp-fixtures: %+v", res)
	}

	// A correlation for the evidence cells, made by the node's own user.
	c, err := jsonrpc.Dial(context.Background(), "unix", n.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err = c.Call(context.Background(), "chp.invoke", map[string]any{"capability_id": "conformance.echo", "payload": map[string]any{"value": "m"},
		"correlation": map[string]any{"correlation_id": "corr-matrix"}}, nil); err != nil {
		t.Fatal(err)
	}
	return n
}

// request builds the request of one cell.
func (n *matrixNode) request(binding, op, key string) wreq {
	rpc := map[string]struct {
		method string
		params map[string]any
	}{
		"invoke":   {"chp.invoke", map[string]any{"capability_id": "conformance.echo", "payload": map[string]any{"value": "m"}}},
		"routed":   {"target.echo", map[string]any{"value": "m"}},
		"describe": {"chp.describe", map[string]any{}},
		"replay":   {"chp.replay", map[string]any{"correlation_id": "corr-matrix"}},
		"export":   {"chp.export", map[string]any{"correlation_id": "corr-matrix"}},
		"verify":   {"chp.verify", map[string]any{"correlation_id": "corr-matrix"}},
		"head":     {"chp.head", map[string]any{}},
		// Without timeout_ms: past the access layer it is -32602, and the
		// node keeps running.
		"drain":      {"health.drain", map[string]any{}},
		"register":   {"ipc.register", map[string]any{"name": "target", "capabilities": []string{"target.echo"}, "endpoint": "unix://" + n.targetSock}},
		"administer": {"registry.invite", map[string]any{}},
		"discover":   {"capabilities.list", map[string]any{}},
	}
	base := "http://" + n.http
	if binding == "chp-fixtures" {
		base, binding = "http://"+n.fixtures, "http-chp"
	}
	switch binding {
	case "http-chp":
		r := map[string]wreq{
			"invoke":   {Method: "POST", URL: base + "/invoke", Body: `{"capability_id":"conformance.echo","payload":{"value":"m"}}`},
			"describe": {Method: "GET", URL: base + "/host"},
			"replay":   {Method: "GET", URL: base + "/replay/corr-matrix"},
			"export":   {Method: "GET", URL: base + "/export/corr-matrix"},
			"verify":   {Method: "GET", URL: base + "/verify/corr-matrix"},
			"head":     {Method: "GET", URL: base + "/head"},
			"discover": {Method: "GET", URL: base + "/health"},
		}[op]
		r.Key = key
		return r
	case "http-metrics":
		return wreq{Method: "GET", URL: base + "/metrics", Key: key}
	case "http-ui":
		u := uiRequests[op]
		return wreq{Method: u.method, URL: base + u.path, Key: key, FirstLine: u.firstLine}
	case "http-registry":
		r := map[string]wreq{
			"register":   {Method: "POST", URL: base + "/agents", Body: `{}`},
			"administer": {Method: "POST", URL: base + "/admin/invite", Body: `{}`},
			"discover":   {Method: "GET", URL: base + "/agents?capability=target.echo"},
		}[op]
		r.Key = key
		return r
	}
	call := rpc[op]
	params := call.params
	if key != "" && binding != "http-jsonrpc" {
		params["_meta"] = map[string]any{"chp_key": key}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": call.method, "params": params})
	switch binding {
	case "unix":
		return wreq{Stream: "unix", Addr: n.sock, Body: string(body)}
	case "tcp":
		return wreq{Stream: "tcp", Addr: n.tcp, Body: string(body)}
	}
	return wreq{Method: "POST", URL: base + "/jsonrpc", Key: key, Body: string(body)}
}

// TestAccessMatrix asserts every cell of the table above against a real
// node: binding × credential × operation.
func TestAccessMatrix(t *testing.T) {
	n := matrixEnv(t)
	bin, why := childBinary(t, n.dir)
	for _, binding := range []string{"unix", "tcp", "http-jsonrpc", "http-chp", "http-registry", "http-metrics", "http-ui", "chp-fixtures"} {
		for op, want := range matrix[binding] {
			for i, cred := range matrixCreds {
				// On the Unix socket only the same user is the test's own
				// process; every other caller is another user.
				other := cred.other || (binding == "unix" && cred.name != "same_uid")
				t.Run(binding+"/"+op+"/"+cred.name, func(t *testing.T) {
					r := n.request(binding, op, cred.key)
					var res wres
					if other {
						if bin == "" {
							t.Skip(why)
						}
						res = asOtherUser(t, bin, r)
					} else {
						res = perform(r)
					}
					if got := outcome(res); got != want[i] {
						t.Errorf("got %s, want %s\nrequest %+v\nresponse %+v", got, want[i], r, res)
					}
				})
			}
		}
	}
}

// TestRoutedCallsCarryTheCaller pins issue 14 point 2: the node's --port
// listener routed any local user's calls to hosts that serve only their
// own user, and the host recorded the caller as the node's own uid,
// verified. Now the node attests who the caller is (a forged attestation
// from the caller is replaced), a host serving only its own user refuses
// an anonymous routed call, an open host accepts it without recording a
// verified Unix peer, and the same user is still the same user through
// the node.
func TestRoutedCallsCarryTheCaller(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", dir)
	t.Setenv("FAMILY_ID", "")
	t.Setenv("NODE_ID", "")
	t.Setenv("CHP_HOST_API_KEY", "")
	t.Setenv("CHP_HOST_API_KEYS", "")
	sock := filepath.Join(dir, "capmesh.sock")
	tcp := freePort(t)
	_, port, _ := net.SplitHostPort(tcp)
	startNode(t, sock, "--port", port)
	closed := startTarget(t, dir, "closed", sock, false)
	open := startTarget(t, dir, "open", sock, true)

	call := func(network, addr, capability, corr string) string {
		// The caller claims to be the node's own user: the node replaces
		// the claim with what it knows.
		meta := map[string]any{"correlation_id": corr, "io.github.capmesh.caller": map[string]any{"kind": "same_user", "uid": os.Getuid()}}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "capability.call", "params": map[string]any{
			"capability": capability, "args": map[string]any{"value": "v", "_meta": meta}}})
		return outcome(perform(wreq{Stream: network, Addr: addr, Body: string(body)}))
	}
	for _, tc := range []struct {
		name, network, addr, target, want string
		verified                          bool
	}{
		{"anonymous to a same-user host", "tcp", tcp, "closed", "-32001", false},
		{"anonymous to an open host", "tcp", tcp, "open", "ok", false},
		{"same user to a same-user host", "unix", sock, "closed", "ok", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			corr := "corr-" + strings.ReplaceAll(tc.name, " ", "-")
			got := call(tc.network, tc.addr, tc.target+".echo", corr)
			if got != tc.want {
				t.Fatalf("routed call: %s, want %s", got, tc.want)
			}
			if got != "ok" {
				return
			}
			h := map[string]*host.Host{"closed": closed, "open": open}[tc.target]
			rr, err := h.Boundary().Replay(context.Background(), chp.ReplayQuery{CorrelationID: corr})
			if err != nil || len(rr.Events) == 0 {
				t.Fatalf("replay %s: %v, %d events", corr, err, len(rr.Events))
			}
			var ev struct {
				Subject struct {
					ID       string `json:"id"`
					Type     string `json:"type"`
					Verified bool   `json:"verified"`
				} `json:"subject"`
			}
			if err := json.Unmarshal(rr.Events[0], &ev); err != nil {
				t.Fatal(err)
			}
			me := "uid:" + strconv.Itoa(os.Getuid())
			if tc.verified != ev.Subject.Verified || (ev.Subject.Verified && (ev.Subject.ID != me || ev.Subject.Type != "unix_peer")) {
				t.Errorf("subject recorded %+v, want verified=%v (%s unix_peer when verified)", ev.Subject, tc.verified, me)
			}
		})
	}
}

// TestNodeRefusesNonLoopbackWithoutKeys pins issue 14 point 10 for the
// node: --http on every interface without keys is refused with a clear
// error (exit 3), and served with --insecure-listen.
func TestNodeRefusesNonLoopbackWithoutKeys(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", dir)
	t.Setenv("FAMILY_ID", "")
	t.Setenv("CHP_HOST_API_KEY", "")
	t.Setenv("CHP_HOST_API_KEYS", "")
	_, port, _ := net.SplitHostPort(freePort(t))
	var stderr strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := Main(ctx, []string{"server", "--memory", "--socket", filepath.Join(dir, "n.sock"), "--http", ":" + port}, strings.NewReader(""), io.Discard, &lockedWriter{w: &stderr})
	if code == 0 || !strings.Contains(stderr.String(), "refusing to serve http") || !strings.Contains(stderr.String(), "--insecure-listen") {
		t.Fatalf("exit %d, stderr %q; want a refusal naming --insecure-listen", code, stderr.String())
	}
	startNode(t, filepath.Join(dir, "m.sock"), "--http", ":"+port, "--insecure-listen")
}

// discardLogger is a logger that writes nothing.
func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// lockedWriter serializes writes to w (the node logs from many goroutines).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestDefaultSocketKeepsOtherUsersOut: with its default mode (0600) the
// node's socket is closed to another user by the kernel itself, before
// SO_PEERCRED is asked — the matrix opens the mode to reach that check.
func TestDefaultSocketKeepsOtherUsersOut(t *testing.T) {
	dir, err := os.MkdirTemp("", "capmesh-access-default-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin, why := childBinary(t, dir)
	if bin == "" {
		t.Skip(why)
	}
	t.Setenv("XDG_RUNTIME_DIR", dir)
	t.Setenv("FAMILY_ID", "")
	t.Setenv("CAPMESH_SOCKET_MODE", "")
	sock := filepath.Join(dir, "capmesh.sock")
	startNode(t, sock)
	body := `{"jsonrpc":"2.0","id":1,"method":"health.liveness"}`
	if got := outcome(asOtherUser(t, bin, wreq{Stream: "unix", Addr: sock, Body: body})); got != "EACCES" {
		t.Errorf("another user on the default socket: %s, want EACCES", got)
	}
	if got := outcome(perform(wreq{Stream: "unix", Addr: sock, Body: body})); got != "ok" {
		t.Errorf("the node's own user: %s", got)
	}
}

// TestRoutedKeyHolders: a key the node verified reaches the executing
// host as that caller — recorded by name, verified — and the key's scope
// is enforced there, as a processed policy_blocked denial with evidence.
func TestRoutedKeyHolders(t *testing.T) {
	n := matrixEnv(t)
	call := func(key, capability, corr string) string {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": capability,
			"params": map[string]any{"value": "v", "_meta": map[string]any{"correlation_id": corr}}})
		return outcome(perform(wreq{Method: "POST", URL: "http://" + n.http + "/jsonrpc", Key: key, Body: string(body)}))
	}
	subject := func(h *host.Host, corr string) map[string]any {
		rr, err := h.Boundary().Replay(context.Background(), chp.ReplayQuery{CorrelationID: corr})
		if err != nil || len(rr.Events) == 0 {
			t.Fatalf("replay %s: %v", corr, err)
		}
		var ev struct {
			Subject map[string]any `json:"subject"`
		}
		if err := json.Unmarshal(rr.Events[0], &ev); err != nil {
			t.Fatal(err)
		}
		return ev.Subject
	}
	if got := call("alice-k", "target.echo", "corr-alice"); got != "ok" {
		t.Fatalf("alice via the node: %s", got)
	}
	if s := subject(n.target, "corr-alice"); s["id"] != "alice" || s["type"] != "api_key" || s["verified"] != true {
		t.Errorf("alice recorded as %v", s)
	}
	if got := call("shared-k", "target.echo", "corr-shared"); got != "ok" {
		t.Fatalf("shared key via the node: %s", got)
	}
	if s := subject(n.target, "corr-shared"); s["verified"] == true {
		t.Errorf("a shared key's call recorded as verified: %v", s)
	}
	// scoped-k is limited to target.*: other.echo is denied where it runs.
	if got := call("scoped-k", "other.echo", "corr-scope"); got != "denied:policy_blocked" {
		t.Fatalf("scoped key outside its scope via the node: %s", got)
	}
	if s := subject(n.other, "corr-scope"); s["id"] != "scoped" || s["verified"] != true {
		t.Errorf("scoped caller recorded as %v", s)
	}
}
