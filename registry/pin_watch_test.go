package registry_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/api"
	"github.com/capmesh/capmesh/registry/descriptor"
)

// TestWatchHistory: ipc.watch (over a Unix socket) replays at least
// WatchHistory events from any retained revision and keeps fewer than
// twice as many; an older cursor is -32010 watch_compacted carrying the
// current revision; a long poll returns the next event.
func TestWatchHistory(t *testing.T) {
	const history = 4
	n, err := registry.NewNode(registry.Config{Network: "N", WatchHistory: history})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	pub := key.Public().(ed25519.PublicKey)
	if _, err := n.Enroll(ctx, base64.StdEncoding.EncodeToString(pub), nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Minute)
	seq := 0
	register := func() {
		t.Helper()
		seq++
		d := descriptor.New("agent", "N", pub, []string{"c"}, descriptor.Endpoint{Host: "127.0.0.1", Port: 7000, Scheme: "tcp"},
			base.Add(time.Duration(seq)*time.Second), time.Hour)
		if err := d.Sign(key); err != nil {
			t.Fatal(err)
		}
		if _, err := n.Register(ctx, d); err != nil {
			t.Fatal(err)
		}
	}

	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "node.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := jsonrpc.NewServer(api.RPC(n), nil)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, l) }()
	defer func() {
		cancel()
		if err := <-served; !errors.Is(err, jsonrpc.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	}()
	c, err := jsonrpc.Dial(ctx, "unix", l.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	type answer struct {
		Revision uint64           `json:"revision"`
		Events   []registry.Event `json:"events"`
	}
	watch := func(since uint64, waitMS int) (answer, error) {
		var a answer
		err := c.Call(ctx, "ipc.watch", map[string]any{"since_revision": since, "wait_ms": waitMS}, &a)
		return a, err
	}

	var rev uint64
	for i := 1; i <= 5*history; i++ {
		register()
		rev = n.Version()
		if i < history {
			continue
		}
		// Right after a trim as much as before one.
		a, err := watch(rev-history, 0)
		if err != nil || a.Revision != rev || len(a.Events) != history || a.Events[history-1].Revision != rev {
			t.Fatalf("after %d registrations, watch from %d back: %+v, %v", i, history, a, err)
		}
		if i <= 2*history {
			continue
		}
		_, err = watch(rev-2*history, 0)
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != -32010 {
			t.Fatalf("after %d registrations, watch from %d back: %v, want -32010", i, 2*history, err)
		}
		var data struct {
			Code    string `json:"code"`
			Details struct {
				Revision uint64 `json:"revision"`
			} `json:"details"`
		}
		if err := json.Unmarshal(je.Data, &data); err != nil || data.Code != "watch_compacted" || data.Details.Revision != rev {
			t.Fatalf("compacted error data %s, want watch_compacted and revision %d", je.Data, rev)
		}
	}
	for d := uint64(1); d < history; d++ {
		a, err := watch(rev-d, 0)
		if err != nil || len(a.Events) != int(d) {
			t.Fatalf("watch from %d back: %+v, %v", d, a, err)
		}
	}

	// A long poll from the current revision returns the next event.
	polled := make(chan answer, 1)
	go func() {
		a, err := watch(rev, 30000)
		if err != nil {
			t.Error(err)
		}
		polled <- a
	}()
	register()
	a := <-polled
	if len(a.Events) != 1 || a.Events[0].Revision != rev+1 || a.Events[0].Kind != registry.EventReplaced {
		t.Fatalf("long poll: %+v", a)
	}
}
