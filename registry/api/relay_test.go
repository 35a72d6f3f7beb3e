package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/chprpc"
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/jsonrpc/jhttp"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/api"
)

// testTimeout only matters when something is wrong (a loaded 2-core box
// running -race).
const testTimeout = 60 * time.Second

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// sockPath is a socket path in a fresh directory removed at cleanup (short
// enough for sun_path).
func sockPath(t testing.TB, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "rl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, name+".sock")
}

// serveUnix serves a on a new Unix socket until cleanup and returns its path.
func serveUnix(t testing.TB, name string, a jsonrpc.Assigner, opts *jsonrpc.ServerOptions) string {
	t.Helper()
	p := sockPath(t, name)
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	if opts == nil {
		opts = &jsonrpc.ServerOptions{}
	}
	opts.Logger = quiet()
	srv := jsonrpc.NewServer(a, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx, l) }()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

// relayNode is a node serving its JSON-RPC surface on a Unix socket, with
// the jsonrpc server returned for an HTTP bridge.
func relayNode(t testing.TB, opts *jsonrpc.ServerOptions) (*registry.Node, *jsonrpc.Server, string) {
	t.Helper()
	return relayNodeWith(t, registry.Config{}, opts)
}

func relayNodeWith(t testing.TB, cfg registry.Config, opts *jsonrpc.ServerOptions) (*registry.Node, *jsonrpc.Server, string) {
	t.Helper()
	cfg.Logger = quiet()
	n, err := registry.NewNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if opts == nil {
		opts = &jsonrpc.ServerOptions{}
	}
	opts.Logger = quiet()
	srv := jsonrpc.NewServer(api.RPC(n), opts)
	p := sockPath(t, "node")
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx, l) }()
	t.Cleanup(func() { cancel(); <-done })
	return n, srv, p
}

func identity(name string) jsonrpc.Handler {
	return jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return map[string]string{"primal": name, "version": "1.0.0"}, nil
	})
}

// register registers the provider at sock under name with caps, through
// the node's socket.
func register(t testing.TB, nodeSock, name, sock string, caps ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, err := jsonrpc.Dial(ctx, "unix", nodeSock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Call(ctx, "ipc.register", map[string]any{"primal_id": name, "capabilities": caps, "endpoint": sock}, nil); err != nil {
		t.Fatalf("ipc.register %s: %v", name, err)
	}
}

type note struct {
	method string
	params string
}

// collector records the notifications a caller's client receives.
type collector struct {
	mu    sync.Mutex
	notes []note
}

func (c *collector) onNotify(method string, params json.RawMessage) {
	c.mu.Lock()
	c.notes = append(c.notes, note{method, string(params)})
	c.mu.Unlock()
}

func (c *collector) snapshot() []note {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]note(nil), c.notes...)
}

// progressParams is the i-th progress notification the provider sends, as
// its jsonrpc server encodes it.
func progressParams(i int) string {
	b, _ := json.Marshal(map[string]any{"progressToken": "tok-7", "progress": i, "total": 3, "message": fmt.Sprintf("step %d", i)})
	return string(b)
}

// progressProvider answers work.run after sending three mcp.progress
// notifications on the caller's connection, as mcpbridge does.
func progressProvider(t testing.TB) string {
	return serveUnix(t, "worker", jsonrpc.Map{
		"identity.get": identity("worker"),
		"work.run": jsonrpc.HandlerFunc(func(ctx context.Context, r *jsonrpc.Request) (any, error) {
			nt, ok := jsonrpc.NotifierFromContext(ctx)
			if !ok {
				return nil, jsonrpc.Errorf(jsonrpc.InternalError, "no notifier")
			}
			for i := 1; i <= 3; i++ {
				if err := nt.Notify(ctx, "mcp.progress", json.RawMessage(progressParams(i))); err != nil {
					return nil, err
				}
			}
			return map[string]any{"done": true}, nil
		}),
	}, nil)
}

func checkProgress(t *testing.T, got []note) {
	t.Helper()
	if len(got) != 3 {
		t.Fatalf("the caller got %d notifications before the answer, want 3: %v", len(got), got)
	}
	for i, n := range got {
		if n.method != "mcp.progress" || n.params != progressParams(i+1) {
			t.Errorf("notification %d: %s %s, want mcp.progress %s", i, n.method, n.params, progressParams(i+1))
		}
	}
}

// TestRelayProviderNotificationsInOrder: a provider's notifications during
// a routed call — a domain.operation and a capability.call — reach a
// caller on a stream connection unchanged and in order, all before the
// answer, and nothing arrives after it.
func TestRelayProviderNotificationsInOrder(t *testing.T) {
	_, srv, nodeSock := relayNode(t, nil)
	register(t, nodeSock, "worker", progressProvider(t), "work")
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(sctx, tl) }()
	defer func() { stop(); <-served }()
	for _, tc := range []struct {
		name, network, addr, method string
		params                      any
	}{
		{"domain.operation", "unix", nodeSock, "work.run", map[string]any{"n": 1}},
		{"capability.call", "unix", nodeSock, "capability.call", map[string]any{"capability": "work", "operation": "run", "args": map[string]any{"n": 1}}},
		{"tcp", "tcp", tl.Addr().String(), "work.run", map[string]any{"n": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			var col collector
			c, err := jsonrpc.Dial(ctx, tc.network, tc.addr, &jsonrpc.ClientOptions{OnNotify: col.onNotify})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var res struct {
				Done bool `json:"done"`
			}
			if err := c.Call(ctx, tc.method, tc.params, &res); err != nil || !res.Done {
				t.Fatalf("%s: %+v, %v", tc.method, res, err)
			}
			// The client hands notifications over on its reader before
			// the response that follows them: what is here now came
			// before the answer.
			checkProgress(t, col.snapshot())
			// A round trip on the same connection: anything relayed after
			// the answer would have arrived by now.
			if err := c.Call(ctx, "ipc.list", nil, nil); err != nil {
				t.Fatal(err)
			}
			if got := col.snapshot(); len(got) != 3 {
				t.Fatalf("notifications after the answer: %v", got[3:])
			}
		})
	}
}

// TestRelayDiscoveredProvider: a provider the router finds by discovery
// (here $WORK_SOCKET), not by registration, has its notifications relayed
// too: the discovered endpoint is dialled through Config.Dial.
func TestRelayDiscoveredProvider(t *testing.T) {
	t.Setenv("BIOMEOS_SOCKET_DIR", filepath.Dir(sockPath(t, "dir")))
	t.Setenv("WORK_SOCKET", progressProvider(t))
	_, _, nodeSock := relayNodeWith(t, registry.Config{Discover: true}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var col collector
	c, err := jsonrpc.Dial(ctx, "unix", nodeSock, &jsonrpc.ClientOptions{OnNotify: col.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var res struct {
		Done bool `json:"done"`
	}
	if err := c.Call(ctx, "work.run", map[string]any{}, &res); err != nil || !res.Done {
		t.Fatalf("work.run through discovery: %+v, %v", res, err)
	}
	checkProgress(t, col.snapshot())
}

// rawLateProvider is a provider written by hand: to work.run it writes
// three notifications, its answer and then two more notifications, in one
// write, so the notifications after the answer are on the wire.
func rawLateProvider(t *testing.T) string {
	return rawProvider(t, "late", func(id json.RawMessage) (string, bool) {
		var out strings.Builder
		for i := 1; i <= 3; i++ {
			fmt.Fprintf(&out, `{"jsonrpc":"2.0","method":"mcp.progress","params":%s}`+"\n", progressParams(i))
		}
		fmt.Fprintf(&out, `{"jsonrpc":"2.0","id":%s,"result":{"done":true}}`+"\n", id)
		out.WriteString(`{"jsonrpc":"2.0","method":"mcp.progress","params":{"late":1}}` + "\n")
		out.WriteString(`{"jsonrpc":"2.0","method":"mcp.progress","params":{"late":2}}` + "\n")
		return out.String(), false
	})
}

// rawProvider is a provider written by hand, named name: it answers
// identity.get, and to work.run writes what run returns in one write,
// then hangs up when run says so.
func rawProvider(t *testing.T, name string, run func(id json.RawMessage) (out string, hangUp bool)) string {
	p := sockPath(t, name)
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				_ = nc.SetDeadline(time.Now().Add(testTimeout))
				br := bufio.NewReader(nc)
				for {
					line, err := br.ReadBytes('\n')
					if err != nil {
						return
					}
					var req struct {
						ID     json.RawMessage `json:"id"`
						Method string          `json:"method"`
					}
					if json.Unmarshal(line, &req) != nil {
						return
					}
					out, hangUp := "", false
					switch req.Method {
					case "identity.get":
						out = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"primal":%q,"version":"1.0.0"}}`+"\n", req.ID, name)
					case "work.run":
						out, hangUp = run(req.ID)
					default:
						out = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`+"\n", req.ID)
					}
					if _, err := io.WriteString(nc, out); err != nil || hangUp {
						return
					}
				}
			}()
		}
	}()
	return p
}

// TestRelayNothingAfterTheAnswer: notifications a provider sends after
// its answer never reach the caller after the answer; those before it
// all do, in order.
func TestRelayNothingAfterTheAnswer(t *testing.T) {
	_, _, nodeSock := relayNode(t, nil)
	register(t, nodeSock, "late", rawLateProvider(t), "work")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var col collector
	c, err := jsonrpc.Dial(ctx, "unix", nodeSock, &jsonrpc.ClientOptions{OnNotify: col.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 5 {
		before := len(col.snapshot())
		if err := c.Call(ctx, "work.run", map[string]any{}, nil); err != nil {
			t.Fatal(err)
		}
		atAnswer := col.snapshot()
		if err := c.Call(ctx, "ipc.list", nil, nil); err != nil {
			t.Fatal(err)
		}
		if got := col.snapshot(); len(got) != len(atAnswer) {
			t.Fatalf("relayed after the answer: %v", got[len(atAnswer):])
		}
		// The three notifications before the answer, in order; one sent
		// after the answer may at most precede it if the router read it
		// before it took the answer (docs/routing.md).
		checkProgress(t, atAnswer[before:before+min(3, len(atAnswer)-before)])
	}
}

// TestRelayFailoverBeforeStart: a provider that hangs up before it sent
// anything is replaced by the next one, whose notifications the caller
// gets.
func TestRelayFailoverBeforeStart(t *testing.T) {
	_, _, nodeSock := relayNode(t, nil)
	register(t, nodeSock, "worker", progressProvider(t), "work")
	// Registered last, so tried first (newest registration first).
	register(t, nodeSock, "mute", rawProvider(t, "mute", func(json.RawMessage) (string, bool) { return "", true }), "work")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var col collector
	c, err := jsonrpc.Dial(ctx, "unix", nodeSock, &jsonrpc.ClientOptions{OnNotify: col.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var res struct {
		Done bool `json:"done"`
	}
	if err := c.Call(ctx, "work.run", map[string]any{}, &res); err != nil || !res.Done {
		t.Fatalf("work.run after a failover: %+v, %v", res, err)
	}
	checkProgress(t, col.snapshot())
}

// TestRelayNoFailoverOnceStarted: a provider that sent the caller a
// notification and then lost the connection is not replaced by the next
// provider (which would repeat the progress or chunks from the start):
// the caller gets provider_unreachable.
func TestRelayNoFailoverOnceStarted(t *testing.T) {
	_, _, nodeSock := relayNode(t, nil)
	register(t, nodeSock, "worker", progressProvider(t), "work")
	// Registered last, so tried first (newest registration first).
	register(t, nodeSock, "broken", rawProvider(t, "broken", func(json.RawMessage) (string, bool) {
		return `{"jsonrpc":"2.0","method":"mcp.progress","params":` + progressParams(1) + "}\n", true
	}), "work")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var col collector
	c, err := jsonrpc.Dial(ctx, "unix", nodeSock, &jsonrpc.ClientOptions{OnNotify: col.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Call(ctx, "work.run", map[string]any{}, nil)
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != registry.CodeUnavailable || !strings.Contains(string(je.Data), "provider_unreachable") {
		t.Fatalf("a provider that began and broke off: %v, want %d provider_unreachable", err, registry.CodeUnavailable)
	}
	if got := col.snapshot(); len(got) != 1 || got[0].params != progressParams(1) {
		t.Fatalf("notifications %v, want the broken provider's one", got)
	}
}

// TestRelayCHPStreamThroughRouter: a streaming chp.invoke routed by the
// node to a real host delivers the host's chp.chunk notifications to the
// caller, in order and complete (their digest verifies against the
// host's evidence), before the terminal result.
func TestRelayCHPStreamThroughRouter(t *testing.T) {
	_, _, nodeSock := relayNode(t, nil)
	hsock := sockPath(t, "words")
	h, err := host.New(host.Info{Name: "words", Version: "1.0.0", Domain: "text", License: "MIT"},
		&host.Config{Socket: hsock, Ephemeral: true, NoAnnounce: true, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	type in struct {
		Text string `json:"text"`
	}
	err = host.RegisterStream(h, "text.words", func(_ context.Context, in in, s *host.Stream) (map[string]int, error) {
		words := strings.Fields(in.Text)
		for _, w := range words {
			if err := s.Send(w); err != nil {
				return nil, err
			}
		}
		return map[string]int{"words": len(words)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	hctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- h.Serve(hctx) }()
	t.Cleanup(func() { stop(); <-served })
	select {
	case <-h.Ready():
	case err := <-served:
		t.Fatalf("host: %v", err)
	}
	// The host answers chp.invoke: the node routes the chp domain to it.
	register(t, nodeSock, "words", hsock, "chp", "text", "text.words")

	for _, tc := range []struct {
		name, method string
		params       func(envelope map[string]any) any
	}{
		// chp.invoke is routed where the node does not answer it itself.
		{"chp.invoke", "chp.invoke", func(env map[string]any) any { return env }},
		// A capmesh server answers chp.invoke with its own boundary: there
		// a CHP stream crosses the router as capability.call.
		{"capability.call", "capability.call", func(env map[string]any) any {
			return map[string]any{"capability": "chp", "operation": "invoke", "args": env}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			corr := "routed-words-" + tc.name
			env := map[string]any{"capability_id": "text.words", "mode": "stream",
				"payload": map[string]any{"text": "streams end in results"}, "correlation_id": corr}
			checkRoutedStream(t, nodeSock, tc.method, tc.params(env), corr)
		})
	}
}

// checkRoutedStream makes the streaming call through the node and checks
// the chunks the caller got against the result and the host's evidence.
func checkRoutedStream(t *testing.T, nodeSock, method string, params any, corr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var col collector
	c, err := jsonrpc.Dial(ctx, "unix", nodeSock, &jsonrpc.ClientOptions{OnNotify: col.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var res chp.InvocationResult
	if err := c.Call(ctx, method, params, &res); err != nil {
		t.Fatal(err)
	}
	if res.Outcome != chp.OutcomeSuccess || string(res.Data) != `{"words":4}` {
		t.Fatalf("result %s %s", res.Outcome, res.Data)
	}
	got := col.snapshot()
	want := []string{`"streams"`, `"end"`, `"in"`, `"results"`}
	if len(got) != len(want) {
		t.Fatalf("the caller got %d chunks through the router, want %d: %v", len(got), len(want), got)
	}
	var deltas []json.RawMessage
	for i, n := range got {
		var ch chprpc.Chunk
		if n.method != chprpc.ChunkMethod || json.Unmarshal([]byte(n.params), &ch) != nil || ch.ID != i || string(ch.Delta) != want[i] || ch.InvocationID != res.InvocationID {
			t.Fatalf("chunk %d: %s %s", i, n.method, n.params)
		}
		deltas = append(deltas, ch.Delta)
	}
	var rep struct {
		Events []struct {
			EventType string          `json:"event_type"`
			Payload   json.RawMessage `json:"payload"`
		} `json:"events"`
	}
	if err := c.Call(ctx, "chp.replay", map[string]any{"correlation_id": corr}, &rep); err != nil {
		t.Fatal(err)
	}
	verified := false
	for _, e := range rep.Events {
		if e.EventType == chp.EventCompleted {
			if err := chp.VerifyChunkSeq(e.Payload, deltas); err != nil {
				t.Fatalf("relayed chunks do not match the evidence: %v", err)
			}
			verified = true
		}
	}
	if !verified {
		t.Fatalf("no %s event in the routed replay", chp.EventCompleted)
	}
}

// TestRelayHTTPBridgeUnchanged: over the node's HTTP bridge (no channel
// for notifications) a routed call whose provider sends notifications is
// answered as before, while a stream caller of the same node gets them.
func TestRelayHTTPBridgeUnchanged(t *testing.T) {
	_, srv, nodeSock := relayNode(t, nil)
	register(t, nodeSock, "worker", progressProvider(t), "work")
	ts := httptest.NewServer(jhttp.Handler(srv))
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	var col collector
	sc, err := jsonrpc.Dial(ctx, "unix", nodeSock, &jsonrpc.ClientOptions{OnNotify: col.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	var streamRes json.RawMessage
	if err := sc.Call(ctx, "work.run", map[string]any{}, &streamRes); err != nil {
		t.Fatal(err)
	}
	checkProgress(t, col.snapshot())

	hc := jhttp.NewClient(ts.URL, nil)
	defer hc.Close()
	for _, tc := range []struct {
		method string
		params any
	}{
		{"work.run", map[string]any{}},
		{"capability.call", map[string]any{"capability": "work", "operation": "run"}},
	} {
		var res json.RawMessage
		if err := hc.Call(ctx, tc.method, tc.params, &res); err != nil {
			t.Fatalf("%s over HTTP: %v", tc.method, err)
		}
		if string(res) != string(streamRes) {
			t.Fatalf("%s over HTTP answered %s, over the socket %s", tc.method, res, streamRes)
		}
	}
}

// TestRelaySlowCallerBackpressure: a caller that sends a routed call and
// never reads does not make the router buffer the provider's
// notifications: the router stops reading from the provider (the provider
// gets only socket buffers' worth out), and once the caller's write
// timeout cuts the caller off, the routed call ends and the provider's
// connection is closed. The node keeps serving.
func TestRelaySlowCallerBackpressure(t *testing.T) {
	_, _, nodeSock := relayNode(t, &jsonrpc.ServerOptions{WriteTimeout: 2 * time.Second})
	const frame = 64 << 10
	const total = 64 << 20 // what the provider tries to send
	pad := strings.Repeat("x", frame)
	sent := make(chan int, 2)
	prov := serveUnix(t, "flood", jsonrpc.Map{
		"identity.get": identity("flood"),
		"flood.run": jsonrpc.HandlerFunc(func(ctx context.Context, r *jsonrpc.Request) (any, error) {
			nt, _ := jsonrpc.NotifierFromContext(ctx)
			n := 0
			for i := 0; n < total; i++ {
				if nt.Notify(ctx, "flood.chunk", map[string]any{"i": i, "pad": pad}) != nil {
					break
				}
				n += frame
			}
			sent <- n
			return "done", nil
		}),
		// The provider's writes wait for the router, not for its own timeout.
	}, &jsonrpc.ServerOptions{WriteTimeout: 10 * testTimeout, MaxMessageBytes: 4 * frame})
	register(t, nodeSock, "flood", prov, "flood")

	// One routed call: the relay waits in the write to the caller until
	// the write timeout cuts the caller off. Two on one connection: while
	// one relay waits in the write, the other's notifications queue behind
	// it, up to the connection's slow-consumer limit (MaxMessageBytes,
	// 4 MiB by default).
	for calls := 1; calls <= 2; calls++ {
		nc, err := net.Dial("unix", nodeSock)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		for id := 1; id <= calls; id++ {
			if _, err := fmt.Fprintf(nc, `{"jsonrpc":"2.0","id":%d,"method":"flood.run","params":{}}`+"\n", id); err != nil {
				t.Fatal(err)
			}
		}
		// The caller reads nothing.
		deadline := time.After(testTimeout)
		for range calls {
			select {
			case n := <-sent:
				if n >= 16<<20 {
					t.Fatalf("the provider got %d bytes of notifications past a caller that reads nothing: the router buffers without backpressure", n)
				}
				t.Logf("%d call(s): the provider got %d KiB out before the router closed its connection", calls, n>>10)
			case <-deadline:
				t.Fatal("a routed call to a caller that reads nothing never ended")
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, err := jsonrpc.Dial(ctx, "unix", nodeSock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Call(ctx, "ipc.list", nil, nil); err != nil {
		t.Fatalf("the node after a slow caller: %v", err)
	}
}

// BenchmarkRoutedCall is a routed call from a stream caller through the
// node: a provider that answers at once, and one that sends three
// progress notifications first, each relayed to the caller.
func BenchmarkRoutedCall(b *testing.B) {
	_, _, nodeSock := relayNode(b, nil)
	prov := serveUnix(b, "bench", jsonrpc.Map{
		"identity.get": identity("bench"),
		"bench.plain":  jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) { return true, nil }),
		"bench.progress": jsonrpc.HandlerFunc(func(ctx context.Context, _ *jsonrpc.Request) (any, error) {
			nt, _ := jsonrpc.NotifierFromContext(ctx)
			for i := 1; i <= 3; i++ {
				if err := nt.Notify(ctx, "mcp.progress", json.RawMessage(progressParams(i))); err != nil {
					return nil, err
				}
			}
			return true, nil
		}),
	}, nil)
	register(b, nodeSock, "bench", prov, "bench")
	for _, m := range []string{"bench.plain", "bench.progress"} {
		b.Run(m, func(b *testing.B) {
			var col collector
			c, err := jsonrpc.Dial(context.Background(), "unix", nodeSock, &jsonrpc.ClientOptions{OnNotify: col.onNotify})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.ReportAllocs()
			for b.Loop() {
				if err := c.Call(context.Background(), m, map[string]any{}, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
