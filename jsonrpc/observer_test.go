package jsonrpc

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is an Observer that keeps what it was told.
type recorder struct {
	mu       sync.Mutex
	requests map[string]int // "method code" → count
	inFlight int
	started  int
	conns    map[string]int // transport → open
	accepted map[string]int
	refused  map[string]int
}

func newRecorder() *recorder {
	return &recorder{requests: map[string]int{}, conns: map[string]int{}, accepted: map[string]int{}, refused: map[string]int{}}
}

func (r *recorder) OnRequest(method string, code Code, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests[fmt.Sprintf("%s %d", method, code)]++
}

func (r *recorder) OnInFlight(delta int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inFlight += delta
	if delta > 0 {
		r.started++
	}
}

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

// await polls cond under the lock until it holds, failing after 10 s.
func (r *recorder) await(t *testing.T, what string, cond func(*recorder) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
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

// TestObserverSeesRequestsConnsAndRefusals drives a server with an
// Observer over TCP: a known method is reported by name, an
// unknown one with an empty name (so that callers cannot mint metric
// labels), connections by transport while open, and the connection and
// message-size limits' refusals by reason. A malformed frame is not a
// request.
func TestObserverSeesRequestsConnsAndRefusals(t *testing.T) {
	rec := newRecorder()
	ls := startLimitsServer(t, specMethods(), &ServerOptions{MaxConns: 4, OwnerReserve: 2, MaxMessageBytes: 1024, Observer: rec})
	a, _ := holdConn(t, "tcp", ls.tcp, 0)
	ra := bufio.NewReader(a)
	_, _ = io.WriteString(a, sentinelReq+`{"jsonrpc":"2.0","method":"no.such-4711","id":2}`+"\n"+"not json\n")
	for range 3 {
		if _, err := ra.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := holdConn(t, "tcp", ls.tcp, 0)
	_, _ = io.WriteString(b, sentinelReq)
	if l, _ := bufio.NewReader(b).ReadString('\n'); l != sentinelResp+"\n" {
		t.Fatalf("second connection: %q", l)
	}
	if _, l := holdConn(t, "tcp", ls.tcp, 10*time.Second); !strings.Contains(l, fmt.Sprintf(`"code":%d`, int(ServerBusy))) {
		t.Fatalf("third connection: %q, want ServerBusy", l)
	}
	rec.await(t, "two open tcp connections and a refusal", func(r *recorder) bool {
		return r.conns["tcp"] == 2 && r.accepted["tcp"] == 2 && r.refused[RefusedMaxConns] == 1
	})
	_, _ = io.WriteString(a, strings.Repeat("x", 2000)+"\n")
	rec.await(t, "the oversized message", func(r *recorder) bool { return r.refused[RefusedMessageTooLarge] == 1 })
	a.Close()
	b.Close()
	rec.await(t, "the connections close", func(r *recorder) bool { return r.conns["tcp"] == 0 })

	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := map[string]int{"ping 0": 2, fmt.Sprintf(" %d", MethodNotFound): 1}
	for k, n := range want {
		if rec.requests[k] != n {
			t.Errorf("requests[%q] = %d, want %d (all: %v)", k, rec.requests[k], n, rec.requests)
		}
	}
	if len(rec.requests) != len(want) {
		t.Errorf("requests reported: %v, want %v", rec.requests, want)
	}
	if rec.inFlight != 0 || rec.started != 2 {
		t.Errorf("in flight %d after %d starts, want 0 after 2", rec.inFlight, rec.started)
	}
}
