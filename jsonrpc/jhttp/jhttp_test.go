package jhttp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/jsonrpc/internal/spectest"
	"github.com/google/go-cmp/cmp"
)

// TestSpecExamplesHTTP posts every example of the specification (§7) to
// the bridge: 200 with the reply whatever the outcome, 204 and no body
// when there is nothing to answer.
func TestSpecExamplesHTTP(t *testing.T) {
	hs, _ := startHTTP(t, specMethods(), nil)
	for _, tc := range spectest.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			resp, err := http.Post(hs.URL+"/jsonrpc", "application/json", strings.NewReader(tc.Req))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if tc.Want == "" {
				if resp.StatusCode != http.StatusNoContent || len(body) != 0 {
					t.Fatalf("want 204 and no body, got %d %q", resp.StatusCode, body)
				}
				return
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200 whatever the outcome", resp.StatusCode)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if diff := cmp.Diff(spectest.Normalize(t, tc.Want), spectest.Normalize(t, string(body))); diff != "" {
				t.Errorf("reply mismatch (-want +got):\n%s\nraw: %s", diff, body)
			}
		})
	}
}

func TestHTTPBridgeStatuses(t *testing.T) {
	hs, _ := startHTTP(t, specMethods(), &jsonrpc.ServerOptions{MaxMessageBytes: 64})
	get, err := http.Get(hs.URL + "/jsonrpc")
	if err != nil {
		t.Fatal(err)
	}
	get.Body.Close()
	if get.StatusCode != http.StatusMethodNotAllowed || get.Header.Get("Allow") != "POST" {
		t.Errorf("GET: %d Allow=%q, want 405 Allow=POST", get.StatusCode, get.Header.Get("Allow"))
	}
	for _, ct := range []string{"text/plain", "", "application/xml"} {
		resp, err := http.Post(hs.URL+"/jsonrpc", ct, strings.NewReader(`{"jsonrpc":"2.0","method":"ping","id":1}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("Content-Type %q: status %d, want 415", ct, resp.StatusCode)
		}
	}
	resp, err := http.Post(hs.URL+"/jsonrpc", "application/json; charset=utf-8", strings.NewReader(`{"jsonrpc":"2.0","method":"ping","id":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("charset parameter: status %d, want 200", resp.StatusCode)
	}
	big := `{"jsonrpc":"2.0","method":"ping","params":["` + strings.Repeat("x", 100) + `"],"id":1}`
	resp, err = http.Post(hs.URL+"/jsonrpc", "application/json", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "-32600") || !strings.Contains(string(body), "64-byte limit") {
		t.Errorf("oversize: %d %s", resp.StatusCode, body)
	}
}

// TestHTTPClient calls, fails and notifies through the bridge.
func TestHTTPClient(t *testing.T) {
	hs, _ := startHTTP(t, specMethods(), nil)
	c := NewClient(hs.URL+"/jsonrpc", nil)
	defer c.Close()
	var got int
	if err := c.Call(context.Background(), "subtract", map[string]int{"minuend": 5, "subtrahend": 2}, &got); err != nil || got != 3 {
		t.Fatalf("got %d %v", got, err)
	}
	if err := c.Call(context.Background(), "nope", nil, nil); !errors.Is(err, jsonrpc.MethodNotFound) {
		t.Fatalf("err %v", err)
	}
	if err := c.Notify(context.Background(), "update", []int{1}); err != nil {
		t.Fatal(err)
	}
}

// TestHTTPNonReaderDisconnected posts a call with a 4 MiB answer over the
// HTTP bridge and never reads it: the write deadline (per 64 KiB, as on
// streams) ends the connection and frees its slot, and the owner is
// answered meanwhile. The old bridge wrote without a deadline, so the
// peer held the response, its goroutine and its slot for as long as it
// liked.
func TestHTTPNonReaderDisconnected(t *testing.T) {
	big := json.RawMessage(`"` + strings.Repeat("z", 4<<20) + `"`)
	m := specMethods()
	m["big"] = hfunc(func(context.Context, *request) (any, error) { return big, nil })
	rec := newRecorder()
	ls := startLimitsServer(t, m, &jsonrpc.ServerOptions{WriteTimeout: 300 * time.Millisecond, Observer: rec})
	c, _ := holdConn(t, "tcp", ls.httpA, 0)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10)
	}
	body := `{"jsonrpc":"2.0","method":"big","id":1}`
	_, _ = fmt.Fprintf(c, "POST /jsonrpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	ownerAnswered(t, ls.unix)
	rec.await(t, "the HTTP peer that does not read its response lose its connection", func(r *recorder) bool {
		return r.accepted["http"] == 1 && r.conns["http"] == 0
	})
}

// TestIDsEchoedByteForByteHTTP checks that the bridge echoes ids exactly
// as sent, in every representation JSON allows (TestIDsEchoedByteForByte
// checks streams).
func TestIDsEchoedByteForByteHTTP(t *testing.T) {
	ids := []string{`1`, `0`, `-7`, `1.0`, `1e2`, `-0`, `12345678901234567890123`, `"abc"`, `"\u0041"`, `"é"`, `""`, `null`, `"a\"b"`}
	hs, _ := startHTTP(t, specMethods(), nil)
	for _, id := range ids {
		req := `{"jsonrpc":"2.0","method":"ping","id":` + id + "}"
		want := `{"jsonrpc":"2.0","result":"pong","id":` + id + `}`
		resp, err := http.Post(hs.URL+"/jsonrpc", "application/json", strings.NewReader(req))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != want {
			t.Errorf("http id %s: got %s, want %s", id, body, want)
		}
	}
}

// TestInvalidUTF8IsParseErrorHTTP posts bodies holding bytes that are not
// UTF-8: each is a parse error, answered 200 with a valid UTF-8 body
// (TestInvalidUTF8IsParseError checks streams).
func TestInvalidUTF8IsParseErrorHTTP(t *testing.T) {
	frames := []string{
		"{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":\"\xff\"}",
		"{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":\"a\xc3\"}",
		"{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":\"\xed\xa0\x80\"}", // an encoded surrogate
		"{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"params\":[\"\xc0\xaf\"],\"id\":1}",
		"[{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":\"\xfe\"}]",
	}
	const want = `{"jsonrpc":"2.0","error":{"code":-32700,`
	hs, _ := startHTTP(t, specMethods(), nil)
	hc := NewClient(hs.URL+"/jsonrpc", hs.Client())
	for _, f := range frames {
		body, status, err := hc.Post(t.Context(), []byte(f))
		if err != nil || status != http.StatusOK || !utf8.Valid(body) || !bytes.HasPrefix(body, []byte(want)) {
			t.Fatalf("HTTP reply to %q: %d %q %v", f, status, body, err)
		}
	}
}

// TestOwnerReserveHTTP fills the connection budget from TCP and HTTP with
// idle connections: further TCP and HTTP clients are refused with
// ServerBusy (HTTP: 503), but the owner's Unix socket stays reachable
// through the reserve. HTTP connections count in the one budget.
func TestOwnerReserveHTTP(t *testing.T) {
	ls := startLimitsServer(t, specMethods(), &jsonrpc.ServerOptions{MaxConns: 12, OwnerReserve: 4})
	// 8 = MaxConns - OwnerReserve non-owner slots: 5 TCP, 3 HTTP.
	for range 5 {
		c, _ := holdConn(t, "tcp", ls.tcp, 0)
		// A ping proves the slot is taken before the next dial.
		_, _ = io.WriteString(c, sentinelReq)
		if l, _ := bufio.NewReader(c).ReadString('\n'); l != sentinelResp+"\n" {
			t.Fatalf("tcp client before the budget is spent: %q", l)
		}
	}
	for range 3 {
		c, _ := holdConn(t, "tcp", ls.httpA, 0)
		_, _ = io.WriteString(c, "GET /jsonrpc HTTP/1.1\r\nHost: x\r\n\r\n")
		if l, _ := bufio.NewReader(c).ReadString('\n'); !strings.HasPrefix(l, "HTTP/1.1 405") {
			t.Fatalf("http client before the budget is spent: %q", l)
		}
	}
	busy := fmt.Sprintf(`"code":%d`, int(jsonrpc.ServerBusy))
	if _, l := holdConn(t, "tcp", ls.tcp, 10*time.Second); !strings.Contains(l, busy) {
		t.Fatalf("tcp client over the budget: %q, want ServerBusy", l)
	}
	c, _ := holdConn(t, "tcp", ls.httpA, 0)
	_, _ = io.WriteString(c, "GET /jsonrpc HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := io.ReadAll(c)
	if err != nil || !strings.HasPrefix(string(resp), "HTTP/1.1 503") || !strings.Contains(string(resp), busy) {
		t.Fatalf("http client over the budget: %q %v", resp, err)
	}
	ownerAnswered(t, ls.unix)
}

// TestLineTimeoutHTTP holds an HTTP request whose body never completes:
// the connection is closed after HeaderTimeout+LineTimeout, while the
// owner is answered meanwhile.
func TestLineTimeoutHTTP(t *testing.T) {
	ls := startLimitsServer(t, specMethods(), &jsonrpc.ServerOptions{LineTimeout: 300 * time.Millisecond, HeaderTimeout: 200 * time.Millisecond})
	slowBody, _ := holdConn(t, "tcp", ls.httpA, 0)
	_, _ = io.WriteString(slowBody, "POST /jsonrpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	ownerAnswered(t, ls.unix)
	_ = slowBody.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, slowBody); err != nil {
		t.Fatalf("slow HTTP body: connection not closed: %v", err)
	}
}

// TestReplyBudgetHTTP checks that the bridge answers a reply over
// MaxReplyBytes with ResponseTooLarge (status 200), as streams do.
func TestReplyBudgetHTTP(t *testing.T) {
	m := specMethods()
	m["big"] = hfunc(func(context.Context, *request) (any, error) {
		return json.RawMessage(`"` + strings.Repeat("y", 300<<10) + `"`), nil
	})
	hs, _ := startHTTP(t, m, &jsonrpc.ServerOptions{MaxReplyBytes: 256 << 10})
	tooLarge := fmt.Sprintf(`{"jsonrpc":"2.0","error":{"code":%d,"message":"Response too large: `, int(jsonrpc.ResponseTooLarge))
	body, status, err := NewClient(hs.URL+"/jsonrpc", hs.Client()).Post(t.Context(), []byte(`{"jsonrpc":"2.0","method":"big","id":2}`))
	if err != nil || status != http.StatusOK || !strings.HasPrefix(string(body), tooLarge) || !strings.HasSuffix(string(body), `"id":2}`) {
		t.Fatalf("HTTP reply over the budget: %d %.300s %v", status, body, err)
	}
}

// TestObserverSeesHTTP checks that a call over the bridge reaches the
// server's Observer: the connection as transport "http", opened and
// closed, and the request by method.
func TestObserverSeesHTTP(t *testing.T) {
	rec := newRecorder()
	ls := startLimitsServer(t, specMethods(), &jsonrpc.ServerOptions{Observer: rec})
	c := NewClient("http://"+ls.httpA+"/jsonrpc", nil)
	var res string
	if err := c.Call(t.Context(), "ping", nil, &res); err != nil || res != "pong" {
		t.Fatalf("over HTTP: %q %v", res, err)
	}
	_ = c.Close()
	rec.await(t, "the HTTP connection open and close", func(r *recorder) bool {
		return r.accepted["http"] == 1 && r.conns["http"] == 0 && r.requests["ping 0"] == 1
	})
}
