package jhttp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/capmesh/capmesh/jsonrpc"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type (
	request = jsonrpc.Request
	hfunc   = jsonrpc.HandlerFunc
)

// specMethods implements the methods used by the examples of the JSON-RPC
// 2.0 specification (§7), as package jsonrpc's tests do.
func specMethods() jsonrpc.Map {
	return jsonrpc.Map{
		"subtract": hfunc(func(_ context.Context, r *request) (any, error) {
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
		"sum": hfunc(func(_ context.Context, r *request) (any, error) {
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
		"update":       hfunc(func(context.Context, *request) (any, error) { return nil, nil }),
		"notify_hello": hfunc(func(context.Context, *request) (any, error) { return nil, nil }),
		"get_data":     hfunc(func(context.Context, *request) (any, error) { return []any{"hello", 5}, nil }),
		"echo.id":      hfunc(func(_ context.Context, r *request) (any, error) { return json.RawMessage(r.ID), nil }),
		"ping":         hfunc(func(context.Context, *request) (any, error) { return "pong", nil }),
	}
}

// sentinel is a ping whose reply proves a connection is served.
const sentinelReq = `{"jsonrpc":"2.0","method":"ping","id":"sentinel"}` + "\n"
const sentinelResp = `{"jsonrpc":"2.0","result":"pong","id":"sentinel"}`

// startHTTP serves the bridge of a new server on an httptest server.
func startHTTP(t *testing.T, a jsonrpc.Assigner, opts *jsonrpc.ServerOptions) (*httptest.Server, *jsonrpc.Server) {
	t.Helper()
	srv := jsonrpc.NewServer(a, opts)
	mux := http.NewServeMux()
	mux.Handle("/jsonrpc", Handler(srv))
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs, srv
}

// limitsServer is one Server serving a Unix socket, a TCP listener and,
// through NewServer and Listener, an HTTP listener: one connection budget.
type limitsServer struct {
	srv              *jsonrpc.Server
	unix, tcp, httpA string
}

func startLimitsServer(t *testing.T, a jsonrpc.Assigner, opts *jsonrpc.ServerOptions) *limitsServer {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	srv := jsonrpc.NewServer(a, opts)
	listen := func(network, addr string) net.Listener {
		l, err := net.Listen(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	ul := listen("unix", filepath.Join(t.TempDir(), "s.sock"))
	tl := listen("tcp", "127.0.0.1:0")
	hl := listen("tcp", "127.0.0.1:0")
	mux := http.NewServeMux()
	mux.Handle("/jsonrpc", Handler(srv))
	hs := NewServer(srv, mux)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 3)
	go func() { done <- srv.Serve(ctx, ul) }()
	go func() { done <- srv.Serve(ctx, tl) }()
	go func() { done <- hs.Serve(Listener(srv, hl)) }()
	t.Cleanup(func() {
		_ = hs.Close()
		cancel()
		for range 3 {
			if err := <-done; !errors.Is(err, jsonrpc.ErrServerClosed) && !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("Serve returned %v", err)
			}
		}
	})
	return &limitsServer{srv: srv, unix: ul.Addr().String(), tcp: tl.Addr().String(), httpA: hl.Addr().String()}
}

// ownerAnswered dials the Unix socket as the owner and fails the test
// unless a ping is answered within 10 s.
func ownerAnswered(t *testing.T, path string) {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("owner dial: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, sentinelReq); err != nil {
		t.Fatalf("owner write: %v", err)
	}
	if got, err := bufio.NewReader(c).ReadString('\n'); err != nil || got != sentinelResp+"\n" {
		t.Fatalf("owner not answered while the attack is held: %q %v", got, err)
	}
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

// recorder is an Observer that keeps what it was told.
type recorder struct {
	mu       sync.Mutex
	requests map[string]int // "method code" → count
	conns    map[string]int // transport → open
	accepted map[string]int
	refused  map[string]int
}

func newRecorder() *recorder {
	return &recorder{requests: map[string]int{}, conns: map[string]int{}, accepted: map[string]int{}, refused: map[string]int{}}
}

func (r *recorder) OnRequest(method string, code jsonrpc.Code, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests[fmt.Sprintf("%s %d", method, code)]++
}

func (r *recorder) OnInFlight(int) {}

func (r *recorder) OnConn(transport string, delta int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conns[transport] += delta
	if delta > 0 {
		r.accepted[transport]++
	}
}

func (r *recorder) OnRefused(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused[reason]++
}

// await polls cond under the lock until it holds, failing after 20 s.
func (r *recorder) await(t *testing.T, what string, cond func(*recorder) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r.mu.Lock()
		ok := cond(r)
		r.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("observer never saw %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
