package jsonrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

func dialClient(t *testing.T, ts *testServer, opts *ClientOptions) *Client {
	t.Helper()
	c, err := Dial(context.Background(), ts.net, ts.addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestClientConcurrentPipelined(t *testing.T) {
	ts := startServer(t, "unix", specMethods(), nil)
	c := dialClient(t, ts, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got int
			if err := c.Call(context.Background(), "subtract", []int{i * 3, i}, &got); err != nil {
				errs <- err
				return
			}
			if got != 2*i {
				errs <- fmt.Errorf("subtract(%d,%d) = %d", 3*i, i, got)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestClientErrors(t *testing.T) {
	ts := startServer(t, "tcp", specMethods(), nil)
	c := dialClient(t, ts, nil)
	err := c.Call(context.Background(), "no.such", nil, nil)
	if !errors.Is(err, MethodNotFound) {
		t.Fatalf("err = %v, want MethodNotFound", err)
	}
	var je *Error
	if !errors.As(err, &je) || !strings.Contains(je.Message, "no.such") {
		t.Fatalf("error %v does not name the method", err)
	}
	if code, ok := ErrorCode(err); !ok || code != MethodNotFound {
		t.Fatalf("ErrorCode = %v %v", code, ok)
	}
	if err := c.Call(context.Background(), "subtract", map[string]any{"minuend": "x"}, nil); !errors.Is(err, InvalidParams) {
		t.Fatalf("err = %v, want InvalidParams", err)
	}
	if err := c.Call(context.Background(), "ping", "not structured", nil); err == nil {
		t.Fatal("scalar params accepted")
	}
	var raw json.RawMessage
	if err := c.Call(context.Background(), "get_data", nil, &raw); err != nil || string(raw) != `["hello",5]` {
		t.Fatalf("raw result %s %v", raw, err)
	}
}

func TestClientContextCancellation(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	m := specMethods()
	m["slow"] = HandlerFunc(func(ctx context.Context, _ *Request) (any, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "late", nil
	})
	ts := startServer(t, "unix", m, nil)
	c := dialClient(t, ts, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Call(ctx, "slow", nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("deadline not honoured")
	}
	// The client keeps working after an abandoned call.
	var s string
	if err := c.Call(context.Background(), "ping", nil, &s); err != nil || s != "pong" {
		t.Fatalf("after cancel: %q %v", s, err)
	}
}

func TestClientConnectionLostWithPendingCalls(t *testing.T) {
	started := make(chan struct{}, 3)
	m := Map{"hang": HandlerFunc(func(ctx context.Context, _ *Request) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})}
	l, err := net.Listen("unix", t.TempDir()+"/s.sock")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(m, nil)
	go func() { _ = srv.Serve(context.Background(), l) }()
	c, err := Dial(context.Background(), "unix", l.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	errs := make(chan error, 3)
	for range 3 {
		go func() { errs <- c.Call(context.Background(), "hang", nil, nil) }()
	}
	for range 3 {
		<-started
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_ = srv.Shutdown(ctx) // aborts the connection
	for range 3 {
		err := <-errs
		var lost *ConnectionLostError
		if !errors.As(err, &lost) || lost.Pending != 3 {
			t.Fatalf("err = %v, want ConnectionLostError with 3 pending", err)
		}
		if !strings.Contains(err.Error(), "connection lost with 3 call(s) pending") {
			t.Fatalf("unclear error: %v", err)
		}
	}
	if err := c.Call(context.Background(), "hang", nil, nil); err == nil {
		t.Fatal("call on a dead connection succeeded")
	}
}

func TestClientNotificationsFromServer(t *testing.T) {
	m := Map{"watch": HandlerFunc(func(ctx context.Context, _ *Request) (any, error) {
		n, ok := NotifierFromContext(ctx)
		if !ok {
			return nil, errors.New("no notifier")
		}
		for i := range 3 {
			if err := n.Notify(ctx, "event", map[string]int{"seq": i}); err != nil {
				return nil, err
			}
		}
		return "subscribed", nil
	})}
	ts := startServer(t, "unix", m, nil)
	got := make(chan string, 3)
	c := dialClient(t, ts, &ClientOptions{OnNotify: func(method string, params json.RawMessage) {
		got <- method + string(params)
	}})
	if err := c.Call(context.Background(), "watch", nil, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		select {
		case s := <-got:
			if want := fmt.Sprintf(`event{"seq":%d}`, i); s != want {
				t.Fatalf("notification %d = %s, want %s", i, s, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("notification not delivered")
		}
	}
}

func TestClientBatch(t *testing.T) {
	ts := startServer(t, "unix", specMethods(), nil)
	c := dialClient(t, ts, nil)
	var a, b int
	calls := []BatchCall{
		{Method: "sum", Params: []int{1, 2, 4}, Result: &a},
		{Method: "notify_hello", Params: []int{7}, Notification: true},
		{Method: "subtract", Params: []int{42, 23}, Result: &b},
		{Method: "foo.get", Params: map[string]string{"name": "myself"}},
	}
	if err := c.Batch(context.Background(), calls); err != nil {
		t.Fatal(err)
	}
	if a != 7 || b != 19 || calls[0].Err != nil || calls[2].Err != nil {
		t.Fatalf("a=%d b=%d errs=%v,%v", a, b, calls[0].Err, calls[2].Err)
	}
	if !errors.Is(calls[3].Err, MethodNotFound) {
		t.Fatalf("foo.get: %v", calls[3].Err)
	}
}
