package jsonrpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capmesh/capmesh/jsonrpc/internal/spectest"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// specMethods implements the methods used by the examples of the JSON-RPC
// 2.0 specification (§7).
func specMethods() Map {
	return Map{
		"subtract": HandlerFunc(func(_ context.Context, r *Request) (any, error) {
			if len(r.Params) > 0 && r.Params[0] == '[' {
				var p [2]int
				if err := r.UnmarshalParams(&p); err != nil {
					return nil, err
				}
				return p[0] - p[1], nil
			}
			var p struct{ Minuend, Subtrahend int }
			if err := r.UnmarshalParams(&p); err != nil {
				return nil, err
			}
			return p.Minuend - p.Subtrahend, nil
		}),
		"sum": HandlerFunc(func(_ context.Context, r *Request) (any, error) {
			var p []int
			if err := r.UnmarshalParams(&p); err != nil {
				return nil, err
			}
			s := 0
			for _, v := range p {
				s += v
			}
			return s, nil
		}),
		"update":       HandlerFunc(func(context.Context, *Request) (any, error) { return nil, nil }),
		"notify_hello": HandlerFunc(func(context.Context, *Request) (any, error) { return nil, nil }),
		"get_data": HandlerFunc(func(context.Context, *Request) (any, error) {
			return []any{"hello", 5}, nil
		}),
		"pretty": HandlerFunc(func(context.Context, *Request) (any, error) {
			return json.RawMessage("{\n  \"a\": [1,\r\n 2]\n}"), nil
		}),
		"echo.id": HandlerFunc(func(_ context.Context, r *Request) (any, error) { return json.RawMessage(r.ID), nil }),
		"ping":    HandlerFunc(func(context.Context, *Request) (any, error) { return "pong", nil }),
	}
}

// testServer runs a server on a real listener and stops it at cleanup.
type testServer struct {
	srv  *Server
	addr string
	net  string
}

func startServer(t *testing.T, network string, a Assigner, opts *ServerOptions) *testServer {
	t.Helper()
	var l net.Listener
	var err error
	switch network {
	case "unix":
		l, err = net.Listen("unix", filepath.Join(t.TempDir(), "s.sock"))
	case "tcp":
		l, err = net.Listen("tcp", "127.0.0.1:0")
	default:
		t.Fatalf("network %q", network)
	}
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(a, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return &testServer{srv: srv, addr: l.Addr().String(), net: network}
}

// rawConn is a newline client that is not ours: plain bytes in and out.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, ts *testServer) *rawConn {
	t.Helper()
	c, err := net.Dial(ts.net, ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

func (r *rawConn) send(s string) {
	r.t.Helper()
	if _, err := io.WriteString(r.c, s); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawConn) line() string {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	l, err := r.br.ReadString('\n')
	if err != nil {
		r.t.Fatalf("reading response: %v (got %q)", err, l)
	}
	if !strings.HasSuffix(l, "\n") || strings.Count(l, "\n") != 1 {
		r.t.Fatalf("response is not exactly one line: %q", l)
	}
	return strings.TrimSuffix(l, "\n")
}

// sentinel is sent after a message that must get no reply: the next line
// must be the sentinel's reply.
const sentinelReq = `{"jsonrpc":"2.0","method":"ping","id":"sentinel"}` + "\n"
const sentinelResp = `{"jsonrpc":"2.0","result":"pong","id":"sentinel"}`

// compactLine turns a multi-line example into one frame.
func compactLine(s string) string {
	var b bytes.Buffer
	if json.Valid([]byte(s)) {
		_ = json.Compact(&b, []byte(s))
		return b.String()
	}
	return strings.ReplaceAll(s, "\n", " ")
}

func TestSpecExamplesStream(t *testing.T) {
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) {
			ts := startServer(t, network, specMethods(), nil)
			rc := dialRaw(t, ts)
			for _, tc := range spectest.Cases {
				t.Run(tc.Name, func(t *testing.T) {
					rc.t = t
					rc.send(compactLine(tc.Req) + "\n")
					if tc.Want == "" {
						rc.send(sentinelReq)
						if got := rc.line(); got != sentinelResp {
							t.Fatalf("expected no reply, got %s", got)
						}
						return
					}
					got := rc.line()
					if diff := cmp.Diff(spectest.Normalize(t, tc.Want), spectest.Normalize(t, got)); diff != "" {
						t.Errorf("reply mismatch (-want +got):\n%s\nraw: %s", diff, got)
					}
				})
			}
		})
	}
}

// TestIDsEchoedByteForByte checks that ids come back exactly as sent, in
// every representation JSON allows.
func TestIDsEchoedByteForByte(t *testing.T) {
	ids := []string{`1`, `0`, `-7`, `1.0`, `1e2`, `-0`, `12345678901234567890123`, `"abc"`, `"\u0041"`, `"é"`, `""`, `null`, `"a\"b"`}
	ts := startServer(t, "unix", specMethods(), nil)
	rc := dialRaw(t, ts)
	for _, id := range ids {
		req := `{"jsonrpc":"2.0","method":"ping","id":` + id + "}"
		want := `{"jsonrpc":"2.0","result":"pong","id":` + id + `}`
		rc.send(req + "\n")
		if got := rc.line(); got != want {
			t.Errorf("stream id %s: got %s, want %s", id, got, want)
		}
	}
	// Ids that are neither string, number nor null make the request invalid.
	for _, id := range []string{`{}`, `[1]`, `true`} {
		rc.send(`{"jsonrpc":"2.0","method":"ping","id":` + id + "}\n")
		got := rc.line()
		if !strings.Contains(got, `"code":-32600`) || !strings.HasSuffix(got, `"id":null}`) {
			t.Errorf("id %s: got %s, want -32600 with id null", id, got)
		}
	}
}

func TestBadInputKeepsConnection(t *testing.T) {
	ts := startServer(t, "tcp", specMethods(), nil)
	rc := dialRaw(t, ts)
	cases := []struct{ in, code, contains string }{
		{"garbage\n", "-32700", "Parse error"},
		{"{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":1} trailing\n", "-32700", "after top-level value"},
		{"42\n", "-32600", "a number"},
		{"\"str\"\n", "-32600", "a string"},
		{"null\n", "-32600", "null"},
		{`{"jsonrpc":"1.0","method":"ping","id":1}` + "\n", "-32600", `must be \"2.0\"`},
		{`{"jsonrpc":2.0,"method":"ping","id":1}` + "\n", "-32600", `must be \"2.0\"`},
		{`{"method":"ping","id":1}` + "\n", "-32600", "missing"},
		{`{"jsonrpc":"2.0","id":1}` + "\n", "-32600", "missing method"},
		{`{"jsonrpc":"2.0","method":"ping","params":"x","id":1}` + "\n", "-32600", "params must be an object or an array"},
		{`{"jsonrpc":"2.0","method":"no.such","id":1}` + "\n", "-32601", `\"no.such\"`},
		{`{"jsonrpc":"2.0","method":"subtract","params":{"minuend":"x"},"id":1}` + "\n", "-32602", "minuend"},
	}
	for _, tc := range cases {
		rc.send(tc.in)
		got := rc.line()
		if !strings.Contains(got, `"code":`+tc.code) || !strings.Contains(strings.ToLower(got), strings.ToLower(tc.contains)) {
			t.Errorf("%q: got %s, want code %s mentioning %q", tc.in, got, tc.code, tc.contains)
		}
		// The connection still works.
		rc.send(sentinelReq)
		if got := rc.line(); got != sentinelResp {
			t.Fatalf("after %q: %s", tc.in, got)
		}
	}
}

// TestPrettyRawResultStaysOneLine pins a bug: a handler returning a
// pretty-printed json.RawMessage broke newline framing.
func TestPrettyRawResultStaysOneLine(t *testing.T) {
	ts := startServer(t, "unix", specMethods(), nil)
	rc := dialRaw(t, ts)
	rc.send(`{"jsonrpc":"2.0","method":"pretty","id":1}` + "\n")
	if got := rc.line(); got != `{"jsonrpc":"2.0","result":{"a":[1,2]},"id":1}` {
		t.Fatalf("got %q", got)
	}
}

func TestFramingTolerance(t *testing.T) {
	ts := startServer(t, "unix", specMethods(), nil)
	c, err := net.Dial("unix", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Preamble, blank lines, CRLF, whitespace-only lines.
	in := "\xEC\x01\n\r\n   \n" + `{"jsonrpc":"2.0","method":"ping","id":1}` + "\r\n\n" + `{"jsonrpc":"2.0","method":"ping","id":2}` + "\n"
	if _, err := io.WriteString(c, in); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for _, want := range []string{`{"jsonrpc":"2.0","result":"pong","id":1}`, `{"jsonrpc":"2.0","result":"pong","id":2}`} {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSuffix(got, "\n") != want && !strings.Contains(got, `"id":`) {
			t.Fatalf("got %q", got)
		}
	}
	// A final line without newline is served when the peer half-closes.
	c2, err := net.Dial("unix", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_, _ = io.WriteString(c2, `{"jsonrpc":"2.0","method":"ping","id":3}`)
	_ = c2.(*net.UnixConn).CloseWrite()
	_ = c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	all, _ := io.ReadAll(c2)
	if string(all) != `{"jsonrpc":"2.0","result":"pong","id":3}`+"\n" {
		t.Fatalf("half-closed: got %q", all)
	}
}

func TestOversizeFrameClosesConnection(t *testing.T) {
	ts := startServer(t, "unix", specMethods(), &ServerOptions{MaxMessageBytes: 1000})
	for _, n := range []int{1001, 100 << 10} { // within and beyond the read buffer
		rc := dialRaw(t, ts)
		rc.send(`{"jsonrpc":"2.0","method":"ping","params":["` + strings.Repeat("a", n) + `"],"id":1}` + "\n")
		got := rc.line()
		if !strings.Contains(got, `"code":-32600`) || !strings.Contains(got, "1000-byte limit") || !strings.HasSuffix(got, `"id":null}`) {
			t.Fatalf("got %s", got)
		}
		_ = rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := rc.br.ReadByte(); err != io.EOF {
			t.Fatalf("connection not closed after oversize frame: %v", err)
		}
	}
	// The server still serves other connections.
	rc := dialRaw(t, ts)
	rc.send(sentinelReq)
	if got := rc.line(); got != sentinelResp {
		t.Fatal(got)
	}
}

func TestHandlerPanicIsInternalError(t *testing.T) {
	m := specMethods()
	m["boom"] = HandlerFunc(func(context.Context, *Request) (any, error) { panic("kaboom") })
	var logs bytes.Buffer
	ts := startServer(t, "unix", m, &ServerOptions{Logger: newTestLogger(&logs)})
	rc := dialRaw(t, ts)
	rc.send(`{"jsonrpc":"2.0","method":"boom","id":7}` + "\n")
	got := rc.line()
	if !strings.Contains(got, `"code":-32603`) || !strings.HasSuffix(got, `"id":7}`) || strings.Contains(got, "kaboom") {
		t.Fatalf("got %s", got)
	}
	rc.send(sentinelReq)
	if got := rc.line(); got != sentinelResp {
		t.Fatal(got)
	}
	if !strings.Contains(logs.String(), "kaboom") || !strings.Contains(logs.String(), "goroutine") {
		t.Errorf("panic not logged with a stack: %s", logs.String())
	}
}

func TestResponsesOutOfOrder(t *testing.T) {
	release := make(chan struct{})
	m := specMethods()
	m["slow"] = HandlerFunc(func(ctx context.Context, _ *Request) (any, error) {
		select {
		case <-release:
			return "slow", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	ts := startServer(t, "unix", m, nil)
	rc := dialRaw(t, ts)
	rc.send(`{"jsonrpc":"2.0","method":"slow","id":1}` + "\n" + `{"jsonrpc":"2.0","method":"ping","id":2}` + "\n")
	if got := rc.line(); got != `{"jsonrpc":"2.0","result":"pong","id":2}` {
		t.Fatalf("first reply %s, want the fast call's", got)
	}
	close(release)
	if got := rc.line(); got != `{"jsonrpc":"2.0","result":"slow","id":1}` {
		t.Fatalf("second reply %s", got)
	}
}

// TestSlowReaderBounded checks that a peer which sends requests but never
// reads its responses costs a bounded number of handled calls and is then
// disconnected by the write deadline.
func TestSlowReaderBounded(t *testing.T) {
	var handled atomic.Int64
	big := json.RawMessage(`"` + strings.Repeat("x", 64<<10) + `"`)
	m := Map{"big": HandlerFunc(func(context.Context, *Request) (any, error) {
		handled.Add(1)
		return big, nil
	})}
	ts := startServer(t, "unix", m, &ServerOptions{MaxInFlight: 4, WriteTimeout: 300 * time.Millisecond})
	c, err := net.Dial("unix", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const sent = 5000
	req := []byte(`{"jsonrpc":"2.0","method":"big","id":1}` + "\n")
	go func() {
		for range sent {
			if _, err := c.Write(req); err != nil {
				return
			}
		}
	}()
	// Wait until the server gives up on us.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		ts.srv.mu.Lock()
		n := len(ts.srv.conns)
		ts.srv.mu.Unlock()
		if n == 0 {
			break
		}
	}
	ts.srv.mu.Lock()
	n := len(ts.srv.conns)
	ts.srv.mu.Unlock()
	if n != 0 {
		t.Fatal("slow reader still connected after the write deadline")
	}
	// Kernel socket buffers hold a few responses; beyond that, only the
	// in-flight bound may be handled.
	if h := handled.Load(); h > 100 {
		t.Fatalf("server handled %d of %d calls for a peer that reads nothing", h, sent)
	}
}

func TestGracefulShutdownDrains(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	m := specMethods()
	m["slow"] = HandlerFunc(func(context.Context, *Request) (any, error) {
		close(started)
		<-release
		return "done", nil
	})
	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(m, nil)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), l) }()
	c, err := net.Dial("unix", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, `{"jsonrpc":"2.0","method":"slow","id":1}`+"\n")
	<-started
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		shut <- srv.Shutdown(ctx)
	}()
	// New connections are refused once shutdown began.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if c2, err := net.Dial("unix", l.Addr().String()); err != nil {
			break
		} else {
			c2.Close()
		}
		if time.Now().After(deadline) {
			t.Fatal("listener still accepting after Shutdown")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := br.ReadString('\n')
	if err != nil || got != `{"jsonrpc":"2.0","result":"done","id":1}`+"\n" {
		t.Fatalf("in-flight call lost on shutdown: %q %v", got, err)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
}

func TestShutdownBoundedWhenHandlerHangs(t *testing.T) {
	started := make(chan struct{})
	m := Map{"hang": HandlerFunc(func(ctx context.Context, _ *Request) (any, error) {
		close(started)
		<-ctx.Done() // only the connection's cancellation ends it
		return nil, ctx.Err()
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(m, nil)
	go func() { _ = srv.Serve(context.Background(), l) }()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, `{"jsonrpc":"2.0","method":"hang","id":1}`+"\n")
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want deadline exceeded", err)
	}
}

func TestIdleTimeout(t *testing.T) {
	ts := startServer(t, "unix", specMethods(), &ServerOptions{IdleTimeout: 100 * time.Millisecond})
	rc := dialRaw(t, ts)
	rc.send(sentinelReq)
	if got := rc.line(); got != sentinelResp {
		t.Fatal(got)
	}
	_ = rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := rc.br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection not closed: %v", err)
	}
}

func TestMaxConns(t *testing.T) {
	ts := startServer(t, "unix", specMethods(), &ServerOptions{MaxConns: 1})
	rc := dialRaw(t, ts)
	rc.send(sentinelReq)
	if got := rc.line(); got != sentinelResp {
		t.Fatal(got)
	}
	rc2 := dialRaw(t, ts)
	if got := rc2.line(); !strings.Contains(got, fmt.Sprint(int(ServerBusy))) {
		t.Fatalf("second connection: %s", got)
	}
	rc.send(sentinelReq)
	if got := rc.line(); got != sentinelResp {
		t.Fatal("first connection broken:", got)
	}
}

func TestConnGate(t *testing.T) {
	gate := func(_ context.Context, p Peer, first []byte) *Error {
		if p.Transport != "unix" {
			t.Errorf("peer transport %q", p.Transport)
		}
		return Errorf(InvalidRequest, "BTSP handshake required")
	}
	ts := startServer(t, "unix", specMethods(), &ServerOptions{ConnGate: gate})
	rc := dialRaw(t, ts)
	rc.send(sentinelReq)
	if got := rc.line(); got != `{"jsonrpc":"2.0","error":{"code":-32600,"message":"BTSP handshake required"},"id":null}` {
		t.Fatalf("got %s", got)
	}
	_ = rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := rc.br.ReadByte(); err != io.EOF {
		t.Fatalf("gated connection not closed: %v", err)
	}
}

func TestPeerCredentials(t *testing.T) {
	got := make(chan Peer, 1)
	m := Map{"who": HandlerFunc(func(ctx context.Context, _ *Request) (any, error) {
		p, _ := PeerFromContext(ctx)
		got <- p
		return nil, nil
	})}
	ts := startServer(t, "unix", m, nil)
	rc := dialRaw(t, ts)
	rc.send(`{"jsonrpc":"2.0","method":"who","id":1}` + "\n")
	rc.line()
	p := <-got
	if p.Transport != "unix" || !p.HasCred || int(p.UID) != geteuid() {
		t.Fatalf("peer %+v", p)
	}
}

// TestShutdownWhileAccepting: connections accepted (and served through
// ServeConn) while Shutdown begins are either served and waited for or
// closed; under -race, counting them must never race with Shutdown's
// wait for a zero count (before, the accept loop's WaitGroup.Add could
// run concurrently with that Wait: a data race seen in CI).
func TestShutdownWhileAccepting(t *testing.T) {
	for i := 0; i < 40; i++ {
		l, err := net.Listen("unix", filepath.Join(t.TempDir(), "s.sock"))
		if err != nil {
			t.Fatal(err)
		}
		srv := NewServer(specMethods(), nil)
		served := make(chan error, 1)
		go func() { served <- srv.Serve(context.Background(), l) }()
		stop := make(chan struct{})
		var dialers sync.WaitGroup
		for d := 0; d < 4; d++ {
			dialers.Add(1)
			go func() {
				defer dialers.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if c, err := net.Dial("unix", l.Addr().String()); err == nil {
						_ = c.Close()
					}
					a, b := net.Pipe()
					go srv.ServeConn(context.Background(), a)
					_ = b.Close()
				}
			}()
		}
		time.Sleep(time.Duration(i%5) * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := srv.Shutdown(ctx); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		cancel()
		close(stop)
		dialers.Wait()
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Fatalf("Serve returned %v, want ErrServerClosed", err)
		}
	}
}
