package jsonrpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// limitsServer is one Server serving a Unix socket and a TCP listener
// (package jhttp's tests add an HTTP listener to the same budget).
type limitsServer struct {
	srv       *Server
	unix, tcp string
}

func startLimitsServer(t *testing.T, a Assigner, opts *ServerOptions) *limitsServer {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = newTestLogger(io.Discard)
	}
	srv := NewServer(a, opts)
	ul, err := net.Listen("unix", filepath.Join(t.TempDir(), "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- srv.Serve(ctx, ul) }()
	go func() { done <- srv.Serve(ctx, tl) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; !errors.Is(err, ErrServerClosed) {
				t.Errorf("Serve returned %v", err)
			}
		}
	})
	return &limitsServer{srv: srv, unix: ul.Addr().String(), tcp: tl.Addr().String()}
}

// ownerAnswered dials the Unix socket as the owner, sends a ping and
// returns the time to the reply. It fails the test if the reply is not
// "pong" within 10 s.
func ownerAnswered(t *testing.T, path string) time.Duration {
	t.Helper()
	start := time.Now()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("owner dial: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, `{"jsonrpc":"2.0","method":"ping","id":"owner"}`+"\n"); err != nil {
		t.Fatalf("owner write: %v", err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || got != `{"jsonrpc":"2.0","result":"pong","id":"owner"}`+"\n" {
		t.Fatalf("owner not answered while the attack is held: %q %v", got, err)
	}
	d := time.Since(start)
	t.Logf("owner answered in %v while the attack is held", d)
	return d
}

// holdConn dials and keeps the connection; the first line the server
// sends, if any arrives within wait, is returned.
func holdConn(t *testing.T, network, addr string, wait time.Duration) (net.Conn, string) {
	t.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if wait == 0 {
		return c, ""
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	l, _ := bufio.NewReader(c).ReadString('\n')
	_ = c.SetReadDeadline(time.Time{})
	return c, l
}

// TestOwnerReserve fills the connection budget from TCP with idle
// connections: further TCP clients are refused with ServerBusy, but the
// owner's Unix socket stays reachable through the reserve. With one shared
// counter (the old server) the owner was refused. (TestOwnerReserveHTTP in
// package jhttp fills it from TCP and HTTP together.)
func TestOwnerReserve(t *testing.T) {
	ls := startLimitsServer(t, specMethods(), &ServerOptions{MaxConns: 12, OwnerReserve: 4})
	// 8 = MaxConns - OwnerReserve non-owner slots.
	for range 8 {
		c, _ := holdConn(t, "tcp", ls.tcp, 0)
		// A ping proves the slot is taken before the next dial.
		_, _ = io.WriteString(c, sentinelReq)
		if l, _ := bufio.NewReader(c).ReadString('\n'); l != sentinelResp+"\n" {
			t.Fatalf("tcp client before the budget is spent: %q", l)
		}
	}
	busy := fmt.Sprintf(`"code":%d`, int(ServerBusy))
	if _, l := holdConn(t, "tcp", ls.tcp, 10*time.Second); !strings.Contains(l, busy) {
		t.Fatalf("tcp client over the budget: %q, want ServerBusy", l)
	}
	ownerAnswered(t, ls.unix)
	// The owner gets the reserve: all four slots, and no more.
	for range 4 {
		dialOwnerPing(t, ls.unix)
	}
	if _, l := holdConn(t, "unix", ls.unix, 10*time.Second); !strings.Contains(l, busy) {
		t.Fatalf("owner client over MaxConns: %q, want ServerBusy", l)
	}
}

// dialOwnerPing dials the Unix socket and pings until a slot is free
// (one just closed may not be released yet), and keeps the connection.
func dialOwnerPing(t *testing.T, path string) net.Conn {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, _ := holdConn(t, "unix", path, 0)
		_ = c.SetReadDeadline(deadline)
		_, _ = io.WriteString(c, sentinelReq)
		l, _ := bufio.NewReader(c).ReadString('\n')
		if l == sentinelResp+"\n" {
			return c
		}
		c.Close()
		if !strings.Contains(l, "Server busy") || time.Now().After(deadline) {
			t.Fatalf("owner client within the reserve: %q", l)
		}
	}
}

// TestLineTimeout holds connections that start a message and never finish
// it — one that stalls after a byte, one that trickles a byte every 20 ms —
// and checks that each is closed after LineTimeout with an InvalidRequest
// naming the deadline, while the owner is answered meanwhile
// (TestLineTimeoutHTTP in package jhttp: an HTTP body that never ends). The old reader only
// had the 5-minute idle timeout, which the trickle kept from firing.
func TestLineTimeout(t *testing.T) {
	ls := startLimitsServer(t, specMethods(), &ServerOptions{LineTimeout: 300 * time.Millisecond, HeaderTimeout: 200 * time.Millisecond})
	stall, _ := holdConn(t, "unix", ls.unix, 0)
	_, _ = io.WriteString(stall, `{"jsonrpc":`)
	trickle, _ := holdConn(t, "tcp", ls.tcp, 0)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				if _, err := trickle.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()
	ownerAnswered(t, ls.unix)
	for name, c := range map[string]net.Conn{"stalled": stall, "trickling": trickle} {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		l, err := br.ReadString('\n')
		if err != nil || !strings.Contains(l, `"code":-32600`) || !strings.Contains(l, "not completed within 300ms") {
			t.Fatalf("%s line: %q %v", name, l, err)
		}
		if _, err := io.Copy(io.Discard, br); err != nil {
			t.Fatalf("%s line: connection not closed: %v", name, err)
		}
	}
}

// TestBatchLimit sends a batch one element over MaxBatch: it is answered
// with one InvalidRequest and none of it runs. The old server ran any
// number of elements (one 4 MB frame produced a 254 MB reply).
func TestBatchLimit(t *testing.T) {
	var ran atomic.Int64
	m := Map{"ping": HandlerFunc(func(_ context.Context, r *Request) (any, error) {
		if string(r.ID) != `"owner"` {
			ran.Add(1)
		}
		return "pong", nil
	})}
	ts := startServer(t, "unix", m, &ServerOptions{MaxBatch: 4})
	rc := dialRaw(t, ts)
	el := `{"jsonrpc":"2.0","method":"ping","id":1}`
	rc.send("[" + strings.Repeat(el+",", 4) + el + "]\n")
	if got := rc.line(); got != `{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request: a batch of 5 elements exceeds the limit of 4"},"id":null}` {
		t.Fatalf("over-long batch: %s", got)
	}
	ownerAnswered(t, ts.addr)
	rc.send("[" + strings.Repeat(el+",", 3) + el + "]\n")
	var replies []json.RawMessage
	if err := json.Unmarshal([]byte(rc.line()), &replies); err != nil || len(replies) != 4 {
		t.Fatalf("batch at the limit: %d replies, %v", len(replies), err)
	}
	if n := ran.Load(); n != 4 {
		t.Fatalf("%d calls ran, want the 4 of the batch within the limit", n)
	}
}

// TestReplyBudget checks MaxReplyBytes: a reply over it is answered
// ResponseTooLarge with the call's id, a batch keeps the results that fit
// and answers the others ResponseTooLarge, and the connection stays
// usable (TestReplyBudgetHTTP in package jhttp: the HTTP bridge does the
// same). The old server built any reply.
func TestReplyBudget(t *testing.T) {
	big := json.RawMessage(`"` + strings.Repeat("x", 100<<10) + `"`)
	m := specMethods()
	m["big"] = HandlerFunc(func(context.Context, *Request) (any, error) { return big, nil })
	opts := &ServerOptions{MaxReplyBytes: 256 << 10}
	ts := startServer(t, "unix", m, opts)
	rc := dialRaw(t, ts)
	tooLarge := fmt.Sprintf(`{"jsonrpc":"2.0","error":{"code":%d,"message":"Response too large: `, int(ResponseTooLarge))
	rc.send(`{"jsonrpc":"2.0","method":"big","id":1}` + "\n")
	if got := rc.line(); len(got) < 100<<10 {
		t.Fatalf("a reply within the budget was refused: %.200s", got)
	}
	m["big"] = HandlerFunc(func(context.Context, *Request) (any, error) { return append(big[:len(big):len(big)], big...), nil })
	big2 := `{"jsonrpc":"2.0","method":"big","id":2}`
	rc.send(strings.Replace(big2, `"big"`, `"pretty"`, 1) + "\n") // a small call first: budget is per pending bytes
	rc.line()
	m["big"] = HandlerFunc(func(context.Context, *Request) (any, error) {
		return json.RawMessage(`"` + strings.Repeat("y", 300<<10) + `"`), nil
	})
	rc.send(big2 + "\n")
	if got := rc.line(); !strings.HasPrefix(got, tooLarge) || !strings.HasSuffix(got, `"id":2}`) {
		t.Fatalf("reply over the budget: %.300s", got)
	}
	ownerAnswered(t, ts.addr)
	m["big"] = HandlerFunc(func(context.Context, *Request) (any, error) { return big, nil })
	rc.send("[" + strings.Repeat(`{"jsonrpc":"2.0","method":"big","id":3},`, 4) + `{"jsonrpc":"2.0","method":"big","id":3}]` + "\n")
	var replies []struct {
		Result json.RawMessage
		Error  *Error
	}
	if err := json.Unmarshal([]byte(rc.line()), &replies); err != nil || len(replies) != 5 {
		t.Fatalf("batch over the budget: %d replies, %v", len(replies), err)
	}
	var kept, refused int
	for _, r := range replies {
		switch {
		case r.Error != nil && r.Error.Code == ResponseTooLarge:
			refused++
		case len(r.Result) > 0:
			kept++
		}
	}
	if kept != 2 || refused != 3 {
		t.Fatalf("batch over the budget: %d results kept, %d refused; want 2 and 3", kept, refused)
	}
	rc.send(sentinelReq)
	if got := rc.line(); got != sentinelResp {
		t.Fatalf("connection unusable after a refused reply: %s", got)
	}
}

// TestSlowReaderGetsWholeReply reads a 4 MiB reply at 64 KiB every 20 ms
// with a 1 s write timeout: each write has its own deadline, so the reply
// arrives whole. The old server gave the whole reply one deadline and cut
// it mid-frame.
func TestSlowReaderGetsWholeReply(t *testing.T) {
	const size = 4 << 20
	big := json.RawMessage(`"` + strings.Repeat("z", size) + `"`)
	m := Map{
		"big":  HandlerFunc(func(context.Context, *Request) (any, error) { return big, nil }),
		"ping": HandlerFunc(func(context.Context, *Request) (any, error) { return "pong", nil }),
	}
	ts := startServer(t, "unix", m, &ServerOptions{WriteTimeout: time.Second})
	c, err := net.Dial("unix", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, `{"jsonrpc":"2.0","method":"big","id":1}`+"\n")
	var got int
	buf := make([]byte, 64<<10)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		n, err := c.Read(buf)
		got += n
		if n > 0 && buf[n-1] == '\n' {
			break
		}
		if err != nil {
			t.Fatalf("reply cut after %d bytes: %v", got, err)
		}
		if got == n {
			ownerAnswered(t, ts.addr) // while the slow read is held
		}
		time.Sleep(20 * time.Millisecond)
	}
	if want := len(`{"jsonrpc":"2.0","result":,"id":1}`+"\n") + len(big); got != want {
		t.Fatalf("got %d bytes, want %d", got, want)
	}
}

// TestReplyBudgetSharedByBatches checks that the reply budget is the
// connection's, not each batch's: a batch whose 7 MiB reply the peer does
// not read (it has read one byte, so the reply is queued) leaves too little
// of an 8 MiB budget for a second batch's 3.5 MiB results, which are
// answered ResponseTooLarge. A budget per batch would keep them, and 64
// batches in flight would hold 64 budgets.
func TestReplyBudgetSharedByBatches(t *testing.T) {
	big := json.RawMessage(`"` + strings.Repeat("x", 3584<<10) + `"`)
	m := Map{"big": HandlerFunc(func(context.Context, *Request) (any, error) { return big, nil })}
	ts := startServer(t, "unix", m, &ServerOptions{MaxReplyBytes: 8 << 20})
	rc := dialRaw(t, ts)
	batch := `[{"jsonrpc":"2.0","method":"big","id":1},{"jsonrpc":"2.0","method":"big","id":2}]` + "\n"
	rc.send(batch)
	_ = rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := rc.br.Peek(1); err != nil { // the first reply is being written
		t.Fatal(err)
	}
	rc.send(batch)
	for i, want := range []int{2, 0} {
		var replies []struct {
			Result json.RawMessage
			Error  *Error
		}
		if err := json.Unmarshal([]byte(rc.line()), &replies); err != nil {
			t.Fatal(err)
		}
		kept := 0
		for _, r := range replies {
			switch {
			case len(r.Result) > 0:
				kept++
			case r.Error == nil || r.Error.Code != ResponseTooLarge:
				t.Fatalf("batch %d: %+v", i, r)
			}
		}
		if kept != want {
			t.Fatalf("batch %d: %d results of 3.5 MiB kept under an 8 MiB connection budget, want %d", i, kept, want)
		}
	}
}

// TestIsOwner pins who may take the owner reserve: only a Unix peer whose
// kernel-reported uid is the server's.
func TestIsOwner(t *testing.T) {
	s := NewServer(Map{}, nil)
	defer func() { _ = s.Shutdown(context.Background()) }()
	uid := uint32(s.euid)
	for _, tc := range []struct {
		p    Peer
		want bool
	}{
		{Peer{Transport: "unix", HasCred: true, UID: uid}, true},
		{Peer{Transport: "unix", HasCred: true, UID: uid + 1}, false},
		{Peer{Transport: "unix", UID: uid}, false}, // no credentials
		{Peer{Transport: "tcp", HasCred: true, UID: uid}, false},
		{Peer{Transport: "http", UID: uid}, false},
	} {
		if got := s.isOwner(tc.p); got != tc.want {
			t.Errorf("isOwner(%+v) = %v, want %v", tc.p, got, tc.want)
		}
	}
}

// TestBlankLinesDoNotStartMessage sends a request followed by an extra
// blank line and then stays quiet for five line timeouts: a blank line is
// not the start of a message, so the connection is idle, not stalled, and
// still serves the next request. (An early version armed the line deadline
// on any buffered byte and closed it.)
func TestBlankLinesDoNotStartMessage(t *testing.T) {
	const line = 100 * time.Millisecond
	ts := startServer(t, "unix", specMethods(), &ServerOptions{LineTimeout: line, IdleTimeout: time.Minute})
	rc := dialRaw(t, ts)
	rc.send(sentinelReq + "\n \r\n")
	if got := rc.line(); got != sentinelResp {
		t.Fatal(got)
	}
	time.Sleep(5 * line) // what is tested is that nothing happens
	rc.send(sentinelReq)
	if got := rc.line(); got != sentinelResp {
		t.Fatalf("quiet connection after blank lines: %s", got)
	}
}
