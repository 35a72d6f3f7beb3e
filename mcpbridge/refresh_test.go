package mcpbridge

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/host"
)

// closeHooks maps a closehook:// evidence URL to what closing the store it
// opens does: a test learns from it that the host's Close has begun.
var closeHooks sync.Map

func init() {
	evidence.Register("closehook", func(_ context.Context, url string, _ *slog.Logger) (evidence.Store, error) {
		f, ok := closeHooks.Load(url)
		if !ok {
			return nil, fmt.Errorf("no close hook for %s", url)
		}
		return &hookedStore{Memory: evidence.NewMemory(), onClose: f.(func())}, nil
	})
}

// hookedStore is a memory evidence store that calls onClose when closed.
type hookedStore struct {
	*evidence.Memory
	onClose func()
}

func (s *hookedStore) Close() error {
	s.onClose()
	return s.Memory.Close()
}

// onHostClose returns an evidence URL for host.Config.EvidenceURL: when
// the host closes its store, f runs (once).
func onHostClose(t *testing.T, f func()) string {
	url := "closehook://" + t.Name()
	closeHooks.Store(url, sync.OnceFunc(f))
	t.Cleanup(func() { closeHooks.Delete(url) })
	return url
}

// recordFunc is a slog.Handler that hands every record to a function.
type recordFunc func(slog.Record)

func (recordFunc) Enabled(context.Context, slog.Level) bool { return true }
func (f recordFunc) Handle(_ context.Context, r slog.Record) error {
	f(r)
	return nil
}
func (f recordFunc) WithAttrs([]slog.Attr) slog.Handler { return f }
func (f recordFunc) WithGroup(string) slog.Handler      { return f }

// holdRelistings makes srv hold every tools/list after the first (the
// bridge's own listing) until release is closed: it reports on held that
// it holds one, and answers it once released.
func holdRelistings(srv *mcp.Server, held chan<- struct{}, release <-chan struct{}) {
	var lists atomic.Int32
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" && lists.Add(1) > 1 {
				select {
				case held <- struct{}{}:
				default:
				}
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return next(ctx, method, req)
		}
	})
}

// TestCloseEndsRefreshes: a re-listing that a tools/list_changed started
// and that is still waiting for the server's answer when Close is called
// ends before Close returns, and never applies an answer after it: the
// server holds the answer until the host's Close has begun, then gives
// it. A re-listing that ignored Close would apply that answer (calling
// OnToolsChanged) whenever it came; the hook waits for Close to return
// to make that visible every time.
func TestCloseEndsRefreshes(t *testing.T) {
	ctx := testCtx(t)
	srv := testServer("adds")
	held, release := make(chan struct{}, 1), make(chan struct{})
	holdRelistings(srv, held, release)
	closed := make(chan struct{})
	ended := make(chan string, 2) // how each re-listing ended
	isClosed := func() bool {
		select {
		case <-closed:
			return true
		default:
			return false
		}
	}
	logger := slog.New(recordFunc(func(r slog.Record) {
		if strings.Contains(r.Message, "re-listing") {
			ended <- fmt.Sprintf("logged %q (after Close returned: %v)", r.Message, isClosed())
		}
	}))
	onChanged := func([]Tool) {
		select {
		case <-closed:
			ended <- "applied the server's answer after Close returned"
		case <-ctx.Done():
			ended <- "applied the server's answer while Close waited"
		}
	}
	b, err := Wrap(ctx, startServer(t, srv), &WrapConfig{Logger: logger, OnToolsChanged: onChanged,
		Host: &host.Config{Socket: filepath.Join(shortDir(t), "b.sock"), EvidenceURL: onHostClose(t, func() { close(release) }),
			Ephemeral: true, NoAnnounce: true, Logger: quietLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "get-product", Description: "multiplies"},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A * in.B}, nil
		})
	select {
	case <-held: // a re-listing is in flight
	case <-ctx.Done():
		t.Fatal("no tools/list after tools/list_changed")
	}
	closeErr := make(chan error, 1)
	go func() {
		closeErr <- b.Close()
		close(closed)
	}()
	select {
	case how := <-ended:
		if want := fmt.Sprintf("(after Close returned: %v)", false); !strings.HasSuffix(how, want) {
			t.Errorf("the re-listing in flight at Close %s", how)
		}
	case <-ctx.Done():
		t.Fatal("the re-listing in flight at Close never ended")
	}
	select {
	case err := <-closeErr:
		if err != nil {
			t.Error(err)
		}
	case <-ctx.Done():
		t.Fatal("Close never returned")
	}
	select {
	case how := <-ended:
		t.Errorf("a second end of a re-listing: %s", how)
	default:
	}
}

// TestListChangedDuringHandshake: a tools/list_changed that the server
// sends before it answered initialize does not re-list on a session the
// bridge does not have yet; the listing that follows the handshake covers
// the change. The fake server withholds its initialize answer until the
// bridge said it skipped that re-listing, so the notification is handled
// while the session is not set, every time.
func TestListChangedDuringHandshake(t *testing.T) {
	ctx := testCtx(t)
	skipped := make(chan struct{})
	once := sync.OnceFunc(func() { close(skipped) })
	logger := slog.New(recordFunc(func(r slog.Record) {
		if strings.Contains(r.Message, "during the handshake") {
			once()
		}
	}))
	cc, sc := net.Pipe()
	served := make(chan error, 1)
	go func() { served <- earlyListChangedServer(ctx, sc, skipped) }()
	b, err := Wrap(ctx, &mcp.IOTransport{Reader: cc, Writer: cc}, &WrapConfig{Logger: logger,
		Host: &host.Config{Socket: filepath.Join(shortDir(t), "b.sock"), Ephemeral: true, NoAnnounce: true, Logger: quietLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	if ts := b.Tools(); len(ts) != 1 || ts[0].Name != "echo" || ts[0].Method != "early.echo" {
		t.Errorf("tools after the handshake: %+v", ts)
	}
	if err := b.Close(); err != nil {
		t.Error(err)
	}
	if err := <-served; err != nil {
		t.Errorf("fake server: %v", err)
	}
}

// earlyListChangedServer is a minimal MCP server on conn that speaks the
// initialize handshake and, on initialize, first sends
// notifications/tools/list_changed and answers only once answer is closed.
// It lists one tool and returns when conn is closed.
func earlyListChangedServer(ctx context.Context, conn net.Conn, answer <-chan struct{}) error {
	defer conn.Close()
	in := bufio.NewScanner(conn)
	in.Buffer(make([]byte, 64<<10), 1<<20)
	enc := json.NewEncoder(conn)
	for in.Scan() {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if err := json.Unmarshal(in.Bytes(), &msg); err != nil {
			return fmt.Errorf("decoding %q: %w", in.Bytes(), err)
		}
		if msg.ID == nil {
			continue // a notification, or a response to no call of ours
		}
		reply := map[string]any{"jsonrpc": "2.0", "id": msg.ID}
		switch msg.Method {
		case "initialize":
			if err := enc.Encode(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}); err != nil {
				return err
			}
			select {
			case <-answer:
			case <-ctx.Done():
				return fmt.Errorf("the bridge never skipped the early re-listing: %w", ctx.Err())
			}
			reply["result"] = map[string]any{"protocolVersion": msg.Params.ProtocolVersion,
				"capabilities": map[string]any{"tools": map[string]any{"listChanged": true}},
				"serverInfo":   map[string]any{"name": "early", "version": "1.0.0"}}
		case "tools/list":
			reply["result"] = map[string]any{"tools": []any{map[string]any{"name": "echo", "description": "echoes", "inputSchema": map[string]any{"type": "object"}}}}
		case "ping":
			reply["result"] = map[string]any{}
		default:
			reply["error"] = map[string]any{"code": -32601, "message": "method not found: " + msg.Method}
		}
		if err := enc.Encode(reply); err != nil {
			return err
		}
	}
	if err := in.Err(); err != nil && err != io.ErrClosedPipe {
		return err
	}
	return nil
}
