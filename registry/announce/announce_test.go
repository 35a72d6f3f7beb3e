package announce_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry/api"

	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/announce"
)

func serveAt(t *testing.T, a jsonrpc.Assigner, path string) (stop func()) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := jsonrpc.NewServer(a, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx, l) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done; l.Close(); os.Remove(path) }) }
	t.Cleanup(stop)
	return stop
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAnnounceHeartbeatAndReRegisterAfterNodeRestart(t *testing.T) {
	dir, _ := os.MkdirTemp("", "cmann")
	defer os.RemoveAll(dir)
	hostSock := filepath.Join(dir, "beardog.sock")
	serveAt(t, jsonrpc.Map{"identity.get": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return map[string]string{"primal": "beardog"}, nil
	})}, hostSock)

	nodeSock := filepath.Join(dir, "capmesh.sock")
	n1, _ := registry.NewNode(registry.Config{LocalTTL: 2 * time.Second, SweepInterval: 50 * time.Millisecond})
	defer n1.Close()
	stop1 := serveAt(t, api.RPC(n1), nodeSock)

	s := announce.Start(context.Background(), announce.Config{Name: "beardog", Capabilities: []string{"crypto"}, Endpoint: "unix://" + hostSock,
		Node: nodeSock, Interval: 100 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&syncBuf{}, nil))})
	defer s.Close()
	waitFor(t, "registration", func() bool { return len(n1.Find("crypto", registry.FindOptions{})) == 1 })
	time.Sleep(5 * time.Second) // > 2 TTLs: only heartbeats (every 100 ms) keep it
	if len(n1.Find("crypto", registry.FindOptions{})) != 1 {
		t.Fatal("registration lapsed despite heartbeats")
	}

	// The node restarts with no state; the host registers again by itself.
	stop1()
	n2, _ := registry.NewNode(registry.Config{LocalTTL: 2 * time.Second})
	defer n2.Close()
	serveAt(t, api.RPC(n2), nodeSock)
	waitFor(t, "re-registration after node restart", func() bool { return len(n2.Find("crypto", registry.FindOptions{})) == 1 })

	// Close unregisters (TestAnnounceCloseUnregisters), or at worst the
	// heartbeats stop and the TTL ends it.
	s.Close()
	waitFor(t, "removal after the host stopped", func() bool { return len(n2.Find("crypto", registry.FindOptions{})) == 0 })
}

func TestAnnounceWarnsOnceWhenNoNode(t *testing.T) {
	var logs syncBuf
	s := announce.Start(context.Background(), announce.Config{Name: "x", Endpoint: "unix:///nonexistent.sock", Node: "/nonexistent/capmesh.sock",
		MaxBackoff: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	time.Sleep(600 * time.Millisecond)
	s.Close()
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d warnings, want exactly 1:\n%s", n, logs.String())
	}
	if ok, _ := s.Registered(); ok {
		t.Fatal("registered with no node")
	}
}

func TestCandidates(t *testing.T) {
	t.Setenv("DISCOVERY_SOCKET", "")
	t.Setenv("BIOMEOS_SOCKET_DIR", "/run/b")
	t.Setenv("FAMILY_ID", "")
	got := announce.Candidates(announce.Config{})
	if len(got) != 2 || got[0] != "/run/b/capmesh.sock" || got[1] != "/run/b/songbird.sock" {
		t.Fatalf("Candidates = %v", got)
	}
	t.Setenv("DISCOVERY_SOCKET", "/x.sock")
	if got := announce.Candidates(announce.Config{}); len(got) != 1 || got[0] != "/x.sock" {
		t.Fatalf("DISCOVERY_SOCKET ignored: %v", got)
	}
}

// TestAnnounceCloseUnregisters: Close withdraws a local registration with
// its token, so the node stops listing the host at once — not at the end
// of the TTL (an hour here) — and says so in its watch stream.
func TestAnnounceCloseUnregisters(t *testing.T) {
	dir, _ := os.MkdirTemp("", "cmann")
	defer os.RemoveAll(dir)
	hostSock := filepath.Join(dir, "beardog.sock")
	serveAt(t, jsonrpc.Map{"identity.get": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return map[string]string{"primal": "beardog"}, nil
	})}, hostSock)
	nodeSock := filepath.Join(dir, "capmesh.sock")
	n, _ := registry.NewNode(registry.Config{LocalTTL: time.Hour})
	defer n.Close()
	serveAt(t, api.RPC(n), nodeSock)

	s := announce.Start(context.Background(), announce.Config{Name: "beardog", Capabilities: []string{"crypto"}, Endpoint: "unix://" + hostSock,
		Node: nodeSock, Logger: slog.New(slog.NewTextHandler(&syncBuf{}, nil))})
	waitFor(t, "registration", func() bool { return len(n.Find("crypto", registry.FindOptions{})) == 1 })
	rev := n.Version()
	s.Close()
	if got := n.Find("crypto", registry.FindOptions{}); len(got) != 0 {
		t.Fatalf("still listed right after Close: %v", got)
	}
	_, evs, err := n.Watch(context.Background(), rev, nil, 0)
	if err != nil || len(evs) != 1 || evs[0].Kind != registry.EventDeregistered || evs[0].Reason != "ipc.unregister" {
		t.Fatalf("watch after Close: %v %+v", err, evs)
	}
}

// TestAnnounceCloseUnregistersAfterNodeRestart: when the node restarted
// (keeping its state) since the last heartbeat, Close withdraws the
// registration on a fresh connection rather than giving up on the broken
// one.
func TestAnnounceCloseUnregistersAfterNodeRestart(t *testing.T) {
	dir, _ := os.MkdirTemp("", "cmann")
	defer os.RemoveAll(dir)
	hostSock := filepath.Join(dir, "beardog.sock")
	serveAt(t, jsonrpc.Map{"identity.get": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return map[string]string{"primal": "beardog"}, nil
	})}, hostSock)
	nodeSock := filepath.Join(dir, "capmesh.sock")
	store := registry.NewMemStore() // the node's durable state, kept across the restart
	n1, _ := registry.NewNode(registry.Config{LocalTTL: time.Hour, Store: store})
	stop1 := serveAt(t, api.RPC(n1), nodeSock)

	s := announce.Start(context.Background(), announce.Config{Name: "beardog", Capabilities: []string{"crypto"}, Endpoint: "unix://" + hostSock,
		Node: nodeSock, Interval: time.Hour, Logger: slog.New(slog.NewTextHandler(&syncBuf{}, nil))})
	defer s.Close()
	waitFor(t, "registration", func() bool { return len(n1.Find("crypto", registry.FindOptions{})) == 1 })
	stop1()
	n1.Close()
	n2, _ := registry.NewNode(registry.Config{LocalTTL: time.Hour, Store: store})
	defer n2.Close()
	serveAt(t, api.RPC(n2), nodeSock)
	if len(n2.Find("crypto", registry.FindOptions{})) != 1 {
		t.Fatal("the restarted node lost the registration")
	}
	s.Close()
	if got := n2.Find("crypto", registry.FindOptions{}); len(got) != 0 {
		t.Fatalf("still listed by the restarted node after Close: %v", got)
	}
}

// TestCandidatesFamilyIsolation: a family-scoped host looks only for its
// family's registry (capmesh-fam2.sock, songbird-fam2.sock), never the
// unscoped capmesh.sock, and a standalone host never for a family's.
func TestCandidatesFamilyIsolation(t *testing.T) {
	t.Setenv("DISCOVERY_SOCKET", "")
	t.Setenv("BIOMEOS_SOCKET_DIR", "/run/b")
	t.Setenv("FAMILY_ID", "fam2")
	got := announce.Candidates(announce.Config{})
	if len(got) != 2 || got[0] != "/run/b/capmesh-fam2.sock" || got[1] != "/run/b/songbird-fam2.sock" {
		t.Fatalf("Candidates = %v", got)
	}
}

// TestAnnounceFamiliesDoNotMix: two families on one machine, each with its
// own node, plus an unscoped node: a fam2 host registers only with the fam2
// node; with no fam2 node it registers nowhere (not with the unscoped one).
func TestAnnounceFamiliesDoNotMix(t *testing.T) {
	dir, _ := os.MkdirTemp("", "cmfam")
	defer os.RemoveAll(dir)
	t.Setenv("DISCOVERY_SOCKET", "")
	t.Setenv("BIOMEOS_SOCKET_DIR", dir)
	hostSock := filepath.Join(dir, "kvhost-fam2.sock")
	serveAt(t, jsonrpc.Map{"identity.get": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return map[string]string{"primal": "kvhost"}, nil
	})}, hostSock)
	nodes := map[string]*registry.Node{}
	for _, name := range []string{"capmesh", "capmesh-fam1"} {
		n, _ := registry.NewNode(registry.Config{LocalTTL: time.Hour})
		defer n.Close()
		serveAt(t, api.RPC(n), filepath.Join(dir, name+".sock"))
		nodes[name] = n
	}
	t.Setenv("FAMILY_ID", "fam2")
	s := announce.Start(context.Background(), announce.Config{Name: "kvhost", Capabilities: []string{"kv"}, Endpoint: "unix://" + hostSock,
		MaxBackoff: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&syncBuf{}, nil))})
	defer s.Close()
	// Several retry rounds without a fam2 node.
	time.Sleep(500 * time.Millisecond)
	for name, n := range nodes {
		if got := n.Find("kv", registry.FindOptions{}); len(got) != 0 {
			t.Fatalf("a fam2 host registered with %s: %v", name, got)
		}
	}
	fam2, _ := registry.NewNode(registry.Config{LocalTTL: time.Hour})
	defer fam2.Close()
	serveAt(t, api.RPC(fam2), filepath.Join(dir, "capmesh-fam2.sock"))
	waitFor(t, "registration with the fam2 node", func() bool { return len(fam2.Find("kv", registry.FindOptions{})) == 1 })
	for name, n := range nodes {
		if got := n.Find("kv", registry.FindOptions{}); len(got) != 0 {
			t.Fatalf("a fam2 host registered with %s: %v", name, got)
		}
	}
}
