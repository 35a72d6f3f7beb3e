package btsp_test

// These tests run capmesh's BTSP server against an independent client,
// testdata/independent/client.js, written in JavaScript from docs/btsp.md and
// the ecoPrimals notes alone. A misreading shared by capmesh's own client and
// server passes btsp_test.go; it fails here.

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capmesh/capmesh/btsp"
	"github.com/capmesh/capmesh/jsonrpc"
)

const (
	indSeed   = "independent-family-seed"
	indClient = "testdata/independent/client.js"
	// indWait bounds anything that only takes long when something is wrong.
	indWait = 20 * time.Second
)

// indResult is what the server saw on one connection.
type indResult struct {
	served []string   // methods answered
	err    error      // the Read error that ended the connection
	state  btsp.State // after the handshake
}

// indServer is a BTSP listener with a tiny JSON-RPC echo responder.
type indServer struct {
	addr  string
	conns chan indResult
}

// startIndServer listens on network ("unix" or "tcp") with cfg and answers
// every JSON-RPC request line with {"method":…, "params":…} as its result.
// It is stopped when the test ends.
func startIndServer(t *testing.T, network string, cfg *btsp.Config) *indServer {
	t.Helper()
	var inner net.Listener
	var err error
	switch network {
	case "unix":
		dir, derr := os.MkdirTemp("", "btsp-ind")
		if derr != nil {
			t.Fatal(derr)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		inner, err = net.Listen("unix", filepath.Join(dir, "s.sock"))
	default:
		inner, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		t.Fatal(err)
	}
	ln := btsp.Listener(inner, cfg)
	s := &indServer{addr: inner.Addr().String(), conns: make(chan indResult, 4)}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { s.conns <- serveEcho(c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-stopped
	})
	return s
}

// serveEcho answers request lines until a Read fails.
func serveEcho(c net.Conn) indResult {
	defer c.Close()
	c.SetDeadline(time.Now().Add(indWait))
	var res indResult
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			res.err = err
			break
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(line, &req); err != nil {
			res.err = fmt.Errorf("server got a line that is not a request: %q: %w", line, err)
			break
		}
		res.served = append(res.served, req.Method)
		reply, _ := json.Marshal(map[string]any{
			"jsonrpc": "2.0",
			"id":      req.ID,
			"result":  map[string]any{"method": req.Method, "params": req.Params},
		})
		if _, err := c.Write(append(reply, '\n')); err != nil {
			res.err = err
			break
		}
	}
	if bc, ok := c.(*btsp.Conn); ok {
		res.state = bc.ConnectionState()
	}
	return res
}

// next waits for the result of the server's next connection.
func (s *indServer) next(t *testing.T) indResult {
	t.Helper()
	select {
	case r := <-s.conns:
		return r
	case <-time.After(indWait):
		t.Fatal("the server never finished the connection")
		return indResult{}
	}
}

// runNode runs the independent client and returns its stdout, stderr and
// exit status.
func runNode(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH: the independent JavaScript BTSP client cannot run")
	}
	ctx, cancel := context.WithTimeout(context.Background(), indWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{indClient}, args...)...)
	cmd.Env = append(os.Environ(), "FAMILY_SEED=")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("running node: %v", err)
	}
	return out.String(), errb.String(), code
}

func lines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// indPretty is indRequest(1, "echo.one") pretty-printed: one JSON-RPC
// message with newlines between its tokens.
const indPretty = "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 1,\n  \"method\": \"echo.one\",\n" +
	"  \"params\": {\"n\": 1, \"s\": \"é\\u2028\\\"x\"}\n}"

func indRequest(id int, method string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"n":%d,"s":"é\u2028\"x"}}`, id, method, id)
}

// checkEcho asserts that got is the echo server's reply to indRequest(id, method).
func checkEcho(t *testing.T, got string, id int, method string) {
	t.Helper()
	var reply struct {
		JSONRPC string `json:"jsonrpc"`
		ID      int    `json:"id"`
		Result  struct {
			Method string `json:"method"`
			Params struct {
				N int    `json:"n"`
				S string `json:"s"`
			} `json:"params"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(got), &reply); err != nil {
		t.Fatalf("reply %q: %v", got, err)
	}
	if reply.JSONRPC != "2.0" || reply.ID != id || reply.Result.Method != method ||
		reply.Result.Params.N != id || reply.Result.Params.S != "é\u2028\"x" {
		t.Fatalf("reply %q is not the echo of request %d (%s)", got, id, method)
	}
}

// TestIndependentClientRoundTrip: the JavaScript client completes the
// handshake in both framings, with and without the first-byte signal, over
// Unix and TCP sockets, and its frames carry requests and replies both ways.
func TestIndependentClientRoundTrip(t *testing.T) {
	for _, network := range []string{"unix", "tcp"} {
		for _, framing := range []string{"json", "binary"} {
			for _, signal := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/signal=%v", network, framing, signal)
				t.Run(name, func(t *testing.T) {
					srv := startIndServer(t, network, &btsp.Config{Seed: indSeed, FamilyID: "fam", Require: true})
					args := []string{"--seed", indSeed}
					if framing == "binary" {
						args = append(args, "--binary")
					}
					if signal {
						args = append(args, "--signal")
					}
					args = append(args, srv.addr, indRequest(1, "echo.one"), indRequest(2, "echo.two"))
					stdout, stderr, code := runNode(t, args...)
					if code != 0 {
						t.Fatalf("client exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
					}
					got := lines(stdout)
					if len(got) != 2 {
						t.Fatalf("client printed %d replies, want 2:\n%s\nstderr: %s", len(got), stdout, stderr)
					}
					checkEcho(t, got[0], 1, "echo.one")
					checkEcho(t, got[1], 2, "echo.two")

					res := srv.next(t)
					if !errors.Is(res.err, io.EOF) || len(res.served) != 2 {
						t.Fatalf("server: served %v, ended with %v; want 2 requests then EOF", res.served, res.err)
					}
					st := res.state
					if st.Mode != btsp.ModeBTSP || st.Cipher != btsp.ChaCha20Poly1305 || st.FamilyID != "fam" {
						t.Fatalf("server state %+v", st)
					}
					if want := fmt.Sprintf("client: session %s cipher %s\n", st.SessionID, btsp.ChaCha20Poly1305); !strings.Contains(stderr, want) {
						t.Fatalf("client and server disagree on the session: server %q, client stderr %q", st.SessionID, stderr)
					}
				})
			}
		}
	}
}

// TestIndependentClientSuitesAndSeedReading: the integrity-only and null
// suites interoperate when the server is configured for them, and a client
// that feeds HKDF the base64 decoding of the seed is accepted too.
func TestIndependentClientSuitesAndSeedReading(t *testing.T) {
	b64Seed := base64.StdEncoding.EncodeToString([]byte("thirty-two bytes of family seed!"))
	cases := []struct {
		name    string
		ciphers []string
		seed    string
		args    []string
		want    string
	}{
		{"hmac-plain", []string{btsp.HMACPlain}, indSeed, []string{"--cipher", btsp.HMACPlain}, btsp.HMACPlain},
		{"null", []string{btsp.Null}, indSeed, []string{"--cipher", btsp.Null}, btsp.Null},
		{"base64-seed", nil, b64Seed, []string{"--seed-base64"}, btsp.ChaCha20Poly1305},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := startIndServer(t, "unix", &btsp.Config{Seed: tc.seed, Ciphers: tc.ciphers})
			args := append([]string{"--seed", tc.seed}, tc.args...)
			stdout, stderr, code := runNode(t, append(args, srv.addr, indRequest(5, "echo"))...)
			if code != 0 {
				t.Fatalf("client exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
			}
			got := lines(stdout)
			if len(got) != 1 {
				t.Fatalf("client printed %q, want one reply", stdout)
			}
			checkEcho(t, got[0], 5, "echo")
			if res := srv.next(t); res.state.Cipher != tc.want || !errors.Is(res.err, io.EOF) {
				t.Fatalf("server: cipher %q, ended with %v", res.state.Cipher, res.err)
			}
		})
	}
}

// TestIndependentClientHandshakeVariants: the liberties docs/btsp.md
// grants a client (unpadded base64, JSON whitespace before the hello, a
// suite the server also accepts) and the ones it leaves to the reader
// (sending the first frame before HandshakeComplete, a message that ends in
// '\n' or is pretty-printed over several lines, a hello and frames that
// arrive one byte at a time) all interoperate; a wrong version and a low-order key get their
// documented error frames.
func TestIndependentClientHandshakeVariants(t *testing.T) {
	both := []string{btsp.ChaCha20Poly1305, btsp.HMACPlain}
	cases := []struct {
		name    string
		ciphers []string
		args    []string
		cipher  string // the suite agreed; "" when the handshake must fail
		reason  string // the server's error frame reason, if any
		first   string // the first request, when not indRequest(1, "echo.one")
	}{
		{"unpadded", nil, []string{"--unpadded"}, btsp.ChaCha20Poly1305, "", ""},
		{"unpadded-binary", nil, []string{"--unpadded", "--binary"}, btsp.ChaCha20Poly1305, "", ""},
		{"pipelined", nil, []string{"--pipeline"}, btsp.ChaCha20Poly1305, "", ""},
		{"pipelined-binary", nil, []string{"--pipeline", "--binary"}, btsp.ChaCha20Poly1305, "", ""},
		{"newline-in-frame", nil, []string{"--newline"}, btsp.ChaCha20Poly1305, "", ""},
		{"space-before-hello", nil, []string{"--prefix", "20"}, btsp.ChaCha20Poly1305, "", ""},
		{"signal-then-tab", nil, []string{"--signal", "--prefix", "09"}, btsp.ChaCha20Poly1305, "", ""},
		{"preferred-second", both, []string{"--cipher", btsp.HMACPlain}, btsp.HMACPlain, "", ""},
		{"dribbled", nil, []string{"--dribble", "--signal"}, btsp.ChaCha20Poly1305, "", ""},
		{"dribbled-binary", nil, []string{"--dribble", "--signal", "--binary"}, btsp.ChaCha20Poly1305, "", ""},
		{"dribbled-pipelined", nil, []string{"--dribble", "--pipeline"}, btsp.ChaCha20Poly1305, "", ""},
		{"pretty-printed-message", nil, nil, btsp.ChaCha20Poly1305, "", indPretty},
		{"version-2", nil, []string{"--hello-version", "2"}, "", btsp.ReasonVersion, ""},
		{"version-2-binary", nil, []string{"--hello-version", "2", "--binary"}, "", btsp.ReasonVersion, ""},
		{"low-order-key", nil, []string{"--low-order-key"}, "", btsp.ReasonFamily, ""},
		{"low-order-key-binary", nil, []string{"--low-order-key", "--binary"}, "", btsp.ReasonFamily, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := startIndServer(t, "unix", &btsp.Config{Seed: indSeed, Ciphers: tc.ciphers, Require: true})
			args := append([]string{"--seed", indSeed}, tc.args...)
			first := indRequest(1, "echo.one")
			if tc.first != "" {
				first = tc.first
			}
			stdout, stderr, code := runNode(t, append(args, srv.addr, first, indRequest(2, "echo.two"))...)
			res := srv.next(t)
			if tc.cipher == "" {
				if code != 1 || stdout != "" || !strings.HasPrefix(stderr, `{"error":"handshake_failed","reason":"`+tc.reason+`"}`+"\n") {
					t.Fatalf("client exit %d, stdout %q, stderr %q; want exit 1 and the %s error frame", code, stdout, stderr, tc.reason)
				}
				if !errors.Is(res.err, btsp.ErrHandshakeFailed) || len(res.served) != 0 {
					t.Fatalf("server: served %v, ended with %v", res.served, res.err)
				}
				return
			}
			got := lines(stdout)
			if code != 0 || len(got) != 2 {
				t.Fatalf("client exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
			}
			checkEcho(t, got[0], 1, "echo.one")
			checkEcho(t, got[1], 2, "echo.two")
			if res.state.Cipher != tc.cipher || !errors.Is(res.err, io.EOF) || len(res.served) != 2 {
				t.Fatalf("server: cipher %q, served %v, ended with %v", res.state.Cipher, res.served, res.err)
			}
		})
	}
}

// TestIndependentClientRefusesUnallowedSuite: the server picks its own first
// suite when it does not accept the client's preferred one, and the client,
// which allowed only that one, refuses (docs/btsp.md). The server then sees
// the connection end before any request.
func TestIndependentClientRefusesUnallowedSuite(t *testing.T) {
	srv := startIndServer(t, "unix", &btsp.Config{Seed: indSeed})
	stdout, stderr, code := runNode(t, "--seed", indSeed, "--cipher", btsp.HMACPlain, srv.addr, indRequest(1, "echo"))
	if code != 1 || stdout != "" || !strings.Contains(stderr, `server chose cipher "`+btsp.ChaCha20Poly1305+`"`) {
		t.Fatalf("client exit %d, stdout %q, stderr %q; want exit 1 refusing the server's suite", code, stdout, stderr)
	}
	if res := srv.next(t); len(res.served) != 0 || res.state.Cipher != btsp.ChaCha20Poly1305 {
		t.Fatalf("server: cipher %q, served %v", res.state.Cipher, res.served)
	}
}

// TestIndependentClientWrongSeed: a client with another seed gets the
// family_verification error frame in its own framing and exits 1.
func TestIndependentClientWrongSeed(t *testing.T) {
	for _, framing := range []string{"json", "binary"} {
		t.Run(framing, func(t *testing.T) {
			srv := startIndServer(t, "unix", &btsp.Config{Seed: indSeed, Require: true})
			args := []string{"--seed", "not-" + indSeed}
			if framing == "binary" {
				args = append(args, "--binary")
			}
			stdout, stderr, code := runNode(t, append(args, srv.addr, indRequest(1, "echo"))...)
			if code != 1 || stdout != "" {
				t.Fatalf("client exit %d, stdout %q; want 1 and nothing\nstderr: %s", code, stdout, stderr)
			}
			frame, _, _ := strings.Cut(stderr, "\n")
			var e struct {
				Error  string `json:"error"`
				Reason string `json:"reason"`
			}
			if err := json.Unmarshal([]byte(frame), &e); err != nil || e.Error != "handshake_failed" || e.Reason != btsp.ReasonFamily {
				t.Fatalf("error frame %q (%v), want handshake_failed / family_verification", frame, err)
			}
			res := srv.next(t)
			if !errors.Is(res.err, btsp.ErrHandshakeFailed) || len(res.served) != 0 {
				t.Fatalf("server: served %v, ended with %v", res.served, res.err)
			}
		})
	}
}

// TestIndependentClientTamperedFrames: a replayed frame, a flipped bit, a
// truncated frame and a reused nonce each end the connection on the server
// with a read error; no tampered frame is ever answered.
func TestIndependentClientTamperedFrames(t *testing.T) {
	const frameLen = 4 + 16 // length bytes and tag around the request
	req1, req2 := indRequest(1, "echo.one"), indRequest(2, "echo.two")
	cases := []struct {
		name    string
		args    []string
		replies int   // replies to the untampered frames before it
		want    error // nil: any error but a clean EOF
	}{
		{"replay", []string{"--replay-frame", req1}, 1, btsp.ErrBadFrame},
		{"nonce-reuse", []string{"--nonce-reuse", req1, req2}, 1, btsp.ErrBadFrame},
		{"flip-length-high", []string{"--flip", "0", req1}, 0, btsp.ErrFrameTooLarge},
		{"flip-length-low", []string{"--flip", "3", req1}, 0, nil},
		{"flip-ciphertext", []string{"--flip", "4", req1}, 0, btsp.ErrBadFrame},
		{"flip-tag", []string{"--flip", fmt.Sprint(len(req1) + frameLen - 1), req1}, 0, btsp.ErrBadFrame},
		{"truncate", []string{"--truncate", req1}, 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := startIndServer(t, "unix", &btsp.Config{Seed: indSeed, Require: true})
			args := append([]string{"--seed", indSeed, srv.addr}, tc.args...)
			stdout, stderr, code := runNode(t, args...)
			if code != 0 {
				t.Fatalf("client exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
			}
			got := lines(stdout)
			if len(got) != tc.replies {
				t.Fatalf("client printed %d replies, want %d:\n%s", len(got), tc.replies, stdout)
			}
			if tc.replies == 1 {
				checkEcho(t, got[0], 1, "echo.one")
			}
			res := srv.next(t)
			if len(res.served) != tc.replies {
				t.Fatalf("server answered %v, want %d request(s)", res.served, tc.replies)
			}
			switch {
			case res.err == nil || errors.Is(res.err, io.EOF):
				t.Fatalf("server read ended with %v, want a frame error", res.err)
			case tc.want != nil && !errors.Is(res.err, tc.want):
				t.Fatalf("server read ended with %v, want %v", res.err, tc.want)
			}
		})
	}
}

// TestIndependentClientCleartext: on a server that requires BTSP, a
// whitelisted cleartext request is served and any other is answered with
// the Capability Wire Standard's rejection frame, carrying its id.
func TestIndependentClientCleartext(t *testing.T) {
	cases := []struct {
		name   string
		req    string
		reject bool
		id     string // the id the rejection carries (a batch: null)
	}{
		{"whitelisted", `{"jsonrpc":"2.0","id":3,"method":"ping"}`, false, ""},
		{"number-id", `{"jsonrpc":"2.0","id":7,"method":"capability.call"}`, true, "7"},
		{"string-id", `{"jsonrpc":"2.0","id":"a-1","method":"evidence.read","params":{}}`, true, `"a-1"`},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"capability.call"}]`, true, "null"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := startIndServer(t, "unix", &btsp.Config{Seed: indSeed, Require: true, Cleartext: btsp.DefaultCleartext})
			stdout, stderr, code := runNode(t, "--cleartext", srv.addr, tc.req)
			if code != 0 {
				t.Fatalf("client exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
			}
			got := lines(stdout)
			if len(got) != 1 {
				t.Fatalf("client printed %q, want one line", stdout)
			}
			res := srv.next(t)
			if !tc.reject {
				if !strings.Contains(got[0], `"method":"ping"`) || len(res.served) != 1 {
					t.Fatalf("whitelisted request not served: reply %q, server %v", got[0], res.served)
				}
				return
			}
			checkRejection(t, got[0], tc.id)
			if len(res.served) != 0 || !errors.Is(res.err, btsp.ErrCleartextRefused) {
				t.Fatalf("server: served %v, ended with %v; want nothing and ErrCleartextRefused", res.served, res.err)
			}
		})
	}
}

// checkRejection asserts that line is the Capability Wire Standard's
// rejection frame: -32600 "BTSP handshake required", btsp_version "2.0",
// and, when id is not empty, that id.
func checkRejection(t *testing.T, line, id string) {
	t.Helper()
	var rej struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				Reason      string `json:"reason"`
				BTSPVersion string `json:"btsp_version"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(line), &rej); err != nil {
		t.Fatalf("rejection %q: %v", line, err)
	}
	if rej.JSONRPC != "2.0" || rej.Error.Code != -32600 || rej.Error.Message != "BTSP handshake required" ||
		rej.Error.Data.BTSPVersion != "2.0" || rej.Error.Data.Reason == "" {
		t.Fatalf("rejection %q is not the standard's frame", line)
	}
	if id != "" && string(rej.ID) != id {
		t.Fatalf("rejection carries id %s, want %s", rej.ID, id)
	}
}

// TestIndependentClientWhitelistAgreesWithEngine: the cleartext whitelist
// must judge a request by the method capmesh's JSON-RPC engine will
// dispatch. The engine matches member names exactly ("method"), so a
// request whose "method" is not whitelisted must be refused whatever other
// members that differ only in case ("METHOD", "Method") say.
//
// It fails today: the whitelist matches member names case-insensitively
// (encoding/json), so {"method":"secret.read","METHOD":"ping"} is judged
// "ping" and let through, and the engine then runs secret.read in
// cleartext. The skip goes with the fix.
func TestIndependentClientWhitelistAgreesWithEngine(t *testing.T) {
	dir, err := os.MkdirTemp("", "btsp-ind")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	inner, err := net.Listen("unix", filepath.Join(dir, "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	var secretCalls atomic.Int32
	methods := jsonrpc.Map{
		"ping": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
			return "pong", nil
		}),
		"secret.read": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
			secretCalls.Add(1)
			return "the secret", nil
		}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- jsonrpc.NewServer(methods, nil).Serve(ctx,
			btsp.Listener(inner, &btsp.Config{Seed: indSeed, Require: true, Cleartext: btsp.DefaultCleartext}))
	}()
	defer func() {
		cancel()
		<-served
	}()

	for _, req := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"secret.read"}`,
		`{"jsonrpc":"2.0","id":1,"method":"secret.read","METHOD":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"Method":"ping","method":"secret.read","mEthod":"ping"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"secret.read","Method":"ping"}]`,
	} {
		stdout, stderr, code := runNode(t, "--cleartext", inner.Addr().String(), req)
		if code != 0 {
			t.Fatalf("client exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
		}
		got := lines(stdout)
		if len(got) != 1 || strings.Contains(stdout, "the secret") {
			t.Errorf("cleartext %s on a family socket was answered %q; want only the rejection frame", req, stdout)
			continue
		}
		checkRejection(t, got[0], "")
	}
	if n := secretCalls.Load(); n != 0 {
		t.Errorf("secret.read ran %d time(s) in cleartext on a socket that requires BTSP", n)
	}
}
