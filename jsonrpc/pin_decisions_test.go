package jsonrpc

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// paramsEcho answers the raw params it was given, "absent" when none.
func paramsEcho() Map {
	m := specMethods()
	m["params.echo"] = HandlerFunc(func(_ context.Context, r *Request) (any, error) {
		if r.Params == nil {
			return "absent", nil
		}
		return string(r.Params), nil
	})
	return m
}

// TestParamsNullIsAbsent: "params": null reaches the handler as absent
// params; any other scalar is -32600 (docs/DECISIONS.md).
func TestParamsNullIsAbsent(t *testing.T) {
	ts := startServer(t, "unix", paramsEcho(), nil)
	rc := dialRaw(t, ts)
	rc.send(`{"jsonrpc":"2.0","method":"params.echo","params":null,"id":1}` + "\n")
	if got, want := rc.line(), `{"jsonrpc":"2.0","result":"absent","id":1}`; got != want {
		t.Fatalf("params null: got %s, want %s", got, want)
	}
	for _, p := range []string{`5`, `"x"`, `true`, `false`} {
		rc.send(`{"jsonrpc":"2.0","method":"params.echo","params":` + p + `,"id":2}` + "\n")
		got := rc.line()
		if !strings.Contains(got, fmt.Sprintf(`"code":%d`, int(InvalidRequest))) || !strings.HasSuffix(got, `"id":2}`) {
			t.Errorf("params %s: got %s, want -32600 with id 2", p, got)
		}
	}
}

// TestDuplicateMembersLastWins: in a request object the last of repeated
// members wins (as with encoding/json) and unknown members are ignored.
func TestDuplicateMembersLastWins(t *testing.T) {
	ts := startServer(t, "unix", paramsEcho(), nil)
	rc := dialRaw(t, ts)
	rc.send(`{"jsonrpc":"1.0","jsonrpc":"2.0","method":"nope","method":"params.echo",` +
		`"params":[1],"params":{"b":2},"id":1,"id":"two","extra":{"x":1}}` + "\n")
	if got, want := rc.line(), `{"jsonrpc":"2.0","result":"{\"b\":2}","id":"two"}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	// A later invalid member spoils an earlier valid one.
	rc.send(`{"jsonrpc":"2.0","method":"params.echo","params":{},"params":5,"id":3}` + "\n")
	if got := rc.line(); !strings.Contains(got, fmt.Sprintf(`"code":%d`, int(InvalidRequest))) {
		t.Fatalf("later scalar params: got %s, want -32600", got)
	}
}

// TestIdleTimeoutSparesCallsInFlight: a connection whose only call runs
// for several idle timeouts is not closed: it still reads and serves new
// calls, the slow call's reply arrives, and once
// nothing is in flight the idle timeout closes it.
func TestIdleTimeoutSparesCallsInFlight(t *testing.T) {
	const idle = 50 * time.Millisecond
	started, release := make(chan struct{}), make(chan struct{})
	m := specMethods()
	m["slow"] = HandlerFunc(func(ctx context.Context, _ *Request) (any, error) {
		close(started)
		select {
		case <-release:
			return "done", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	ts := startServer(t, "unix", m, &ServerOptions{IdleTimeout: idle})
	rc := dialRaw(t, ts)
	rc.send(`{"jsonrpc":"2.0","method":"slow","id":1}` + "\n")
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("handler not started")
	}
	// Long enough for the idle deadline to expire several times over; the
	// check only passes vacuously on a machine too slow to notice.
	time.Sleep(10 * idle)
	// The connection still reads: a new call is served meanwhile.
	rc.send(sentinelReq)
	if got := rc.line(); got != sentinelResp {
		t.Fatalf("call after the idle timeout with a call in flight: got %s", got)
	}
	close(release)
	if got, want := rc.line(), `{"jsonrpc":"2.0","result":"done","id":1}`; got != want {
		t.Fatalf("reply of the call in flight: got %s, want %s", got, want)
	}
	_ = rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := rc.br.ReadByte(); err == nil {
		t.Fatal("idle connection not closed after the call ended")
	}
}

// TestCallsRunOnReusedGoroutines: calls that are not inline run on pooled
// workers, which keep their grown stacks: consecutive calls on a
// connection soon run on a goroutine an earlier call ran on (goroutine ids
// are never reused by the runtime, so an equal id is the same goroutine).
func TestCallsRunOnReusedGoroutines(t *testing.T) {
	m := specMethods()
	m["goid"] = HandlerFunc(func(context.Context, *Request) (any, error) {
		buf := make([]byte, 64)
		f := strings.Fields(string(buf[:runtime.Stack(buf, false)]))
		return f[1], nil
	})
	ts := startServer(t, "unix", m, nil)
	rc := dialRaw(t, ts)
	seen := map[string]bool{}
	for i := range 200 {
		rc.send(`{"jsonrpc":"2.0","method":"goid","id":1}` + "\n")
		got := rc.line()
		if seen[got] {
			return
		}
		seen[got] = true
		if i%10 == 9 {
			// Give the worker time to park before the next call; a
			// pool never needs more than a few.
			time.Sleep(10 * time.Millisecond)
		}
	}
	t.Fatalf("200 consecutive calls ran on %d distinct goroutines", len(seen))
}
