package announce_test

import (
	"bufio"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry/api"

	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/announce"
)

// startSongbirdMock runs testdata/songbird_mock.py on a socket in dir and
// stops it when the test ends. It skips the test without python3.
func startSongbirdMock(t *testing.T, sock string, speed, ttl string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	cmd := exec.Command(py, "testdata/songbird_mock.py", "--socket", sock, "--speed", speed, "--ttl", ttl)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan bool, 1)
	go func() { ready <- bufio.NewScanner(out).Scan() }()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("songbird mock exited before it was ready")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("songbird mock did not start")
	}
}

type mockStats struct {
	Elapsed float64        `json:"elapsed"`
	Gap     float64        `json:"gap_seconds"`
	Live    bool           `json:"live"`
	Counts  map[string]int `json:"counts"`
}

func songbirdStats(t *testing.T, sock, name string) mockStats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := jsonrpc.Dial(ctx, "unix", sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var st mockStats
	if err := c.Call(ctx, "mock.stats", map[string]string{"name": name}, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestAnnounceKeepsSongbirdRegistration: against a Songbird-like registry
// (trust-on-first-use ipc.register, no ipc.heartbeat — it answers -32603
// "Unknown method" — duplicates refused, a 120 s TTL) a host stays
// registered without a gap for 10 minutes of the registry's clock (run 40×
// fast, so the TTL is 3 s of wall time): it notices once that heartbeats are unsupported and renews by
// registering again at a third of the TTL the registry returned.
func TestAnnounceKeepsSongbirdRegistration(t *testing.T) {
	dir, _ := os.MkdirTemp("", "cmsong")
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "songbird.sock")
	startSongbirdMock(t, sock, "40", "120")
	var logs syncBuf
	s := announce.Start(context.Background(), announce.WithTimeScale(announce.Config{Name: "kvhost", Capabilities: []string{"kv"},
		Endpoint: "unix://" + filepath.Join(dir, "kvhost.sock"), Node: sock, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, 40))
	defer s.Close()
	waitFor(t, "registration", func() bool { ok, _ := s.Registered(); return ok })
	changed := s.Changed()
	deadline := time.Now().Add(2 * time.Minute)
	var st mockStats
	for st = songbirdStats(t, sock, "kvhost"); st.Elapsed < 600; st = songbirdStats(t, sock, "kvhost") {
		if time.Now().After(deadline) {
			t.Fatalf("mock clock stuck at %.0f s", st.Elapsed)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st.Gap != 0 || !st.Live {
		t.Fatalf("host unregistered for %.1f s of 600 (live now: %v); calls %v\n%s", st.Gap, st.Live, st.Counts, logs.String())
	}
	if st.Counts["heartbeat"] != 1 || st.Counts["register"] != 1 || st.Counts["renew"] < 12 || st.Counts["duplicate"] != 0 {
		t.Fatalf("calls %v: want one heartbeat attempt, one registration, a renewal every ≤40 s, no duplicate", st.Counts)
	}
	select {
	case <-changed:
		t.Fatalf("the session left the registered state:\n%s", logs.String())
	default:
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("warnings while registered:\n%s", logs.String())
	}
}

// TestAnnounceHeartbeatFollowsTTL: the heartbeat pace follows the TTL the
// node returns (ttl_seconds), not a fixed 30 s: with a 3 s TTL the host
// stays listed for more than two TTLs with no Interval configured.
func TestAnnounceHeartbeatFollowsTTL(t *testing.T) {
	dir, _ := os.MkdirTemp("", "cmann")
	defer os.RemoveAll(dir)
	hostSock := filepath.Join(dir, "beardog.sock")
	serveAt(t, identity("beardog"), hostSock)
	nodeSock := filepath.Join(dir, "capmesh.sock")
	n, _ := registry.NewNode(registry.Config{LocalTTL: 3 * time.Second, SweepInterval: 20 * time.Millisecond})
	defer n.Close()
	serveAt(t, api.RPC(n), nodeSock)
	s := announce.Start(context.Background(), announce.Config{Name: "beardog", Capabilities: []string{"crypto"}, Endpoint: "unix://" + hostSock,
		Node: nodeSock, Logger: slog.New(slog.NewTextHandler(&syncBuf{}, nil))})
	defer s.Close()
	waitFor(t, "registration", func() bool { return len(n.Find("crypto", registry.FindOptions{})) == 1 })
	rev := n.Version()
	time.Sleep(7 * time.Second) // > 2 TTLs: only heartbeats keep it
	_, evs, err := n.Watch(context.Background(), rev, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Kind == registry.EventDeregistered || ev.Kind == registry.EventExpired {
			t.Fatalf("registration lapsed: %+v", ev)
		}
	}
	if len(n.Find("crypto", registry.FindOptions{})) != 1 {
		t.Fatal("registration lapsed")
	}
}

func identity(name string) jsonrpc.Map {
	return jsonrpc.Map{"identity.get": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return map[string]string{"primal": name}, nil
	})}
}

// TestAnnounceWarnsOncePerOutage: every outage gets one WARN, every
// recovery one INFO — a second outage is not silent because the first
// one was reported.
func TestAnnounceWarnsOncePerOutage(t *testing.T) {
	dir, _ := os.MkdirTemp("", "cmann")
	defer os.RemoveAll(dir)
	hostSock := filepath.Join(dir, "beardog.sock")
	serveAt(t, identity("beardog"), hostSock)
	nodeSock := filepath.Join(dir, "capmesh.sock")
	var logs syncBuf
	n, _ := registry.NewNode(registry.Config{LocalTTL: time.Hour})
	stop := serveAt(t, api.RPC(n), nodeSock)
	s := announce.Start(context.Background(), announce.Config{Name: "beardog", Capabilities: []string{"crypto"}, Endpoint: "unix://" + hostSock,
		Node: nodeSock, Interval: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer s.Close()
	for i := range 2 {
		if i > 0 {
			n, _ = registry.NewNode(registry.Config{LocalTTL: time.Hour})
			stop = serveAt(t, api.RPC(n), nodeSock)
		}
		waitFor(t, "registration", func() bool { ok, _ := s.Registered(); return ok })
		stop()
		n.Close()
		waitFor(t, "the outage", func() bool { ok, _ := s.Registered(); return !ok })
		waitFor(t, "the warning", func() bool { return strings.Count(logs.String(), "level=WARN") == i+1 })
	}
	if n := strings.Count(logs.String(), "registered again"); n != 1 {
		t.Fatalf("%d recoveries logged, want 1:\n%s", n, logs.String())
	}
}
