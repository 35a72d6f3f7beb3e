package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/capmesh/capmesh/identity"
)

// lockedBuffer is a bytes.Buffer safe for the server's logger and the test.
type lockedBuffer struct {
	ch chan struct{}
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.ch <- struct{}{}
	defer func() { <-l.ch }()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.ch <- struct{}{}
	defer func() { <-l.ch }()
	return l.b.String()
}

// serveGenesis runs `capmesh server` with args on a free loopback HTTP
// port, fetches GET /genesis and stops the server.
func serveGenesis(t *testing.T, args ...string) (root, na string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	out := &lockedBuffer{ch: make(chan struct{}, 1)}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, append([]string{"server", "--no-socket", "--http", addr}, args...), bytes.NewReader(nil), out, out)
	}()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("server did not stop within 30s")
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case code := <-done:
			done <- code
			t.Fatalf("server exited %d:\n%s", code, out.String())
		default:
		}
		resp, err := http.Get("http://" + addr + "/genesis")
		if err == nil {
			var g struct {
				Root string `json:"root_public_key"`
				NA   struct {
					PublicKey string `json:"public_key"`
				} `json:"network_authority"`
			}
			derr := json.NewDecoder(resp.Body).Decode(&g)
			resp.Body.Close()
			if resp.StatusCode != 200 || derr != nil {
				t.Fatalf("GET /genesis: %d %v", resp.StatusCode, derr)
			}
			return g.Root, g.NA.PublicKey
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not answer within 30s: %v\n%s", err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServerGenesisRootKey is issue 14 #9 at the CLI: the node creates a
// root key beside its node key on first start (keys/root.pem) and keeps
// it, or uses --root-key; GET /genesis publishes it as root and the NA key
// apart from it.
func TestServerGenesisRootKey(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	data := t.TempDir()
	root1, na1 := serveGenesis(t, "--data-dir", data)
	stored, err := identity.Load(filepath.Join(data, "keys", "root.pem"))
	if err != nil {
		t.Fatalf("no root key beside the node key: %v", err)
	}
	if root1 != stored.Public().Base64() || root1 == na1 || na1 == "" {
		t.Errorf("genesis root %s, NA %s; want root keys/root.pem's %s, apart from the NA key", root1, na1, stored.Public().Base64())
	}
	root2, na2 := serveGenesis(t, "--data-dir", data)
	if root2 != root1 || na2 != na1 {
		t.Errorf("restart changed the genesis keys: root %s → %s, NA %s → %s", root1, root2, na1, na2)
	}

	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "root.pem")
	if err := k.Save(path); err != nil {
		t.Fatal(err)
	}
	root3, na3 := serveGenesis(t, "--memory", "--root-key", path)
	if root3 != k.Public().Base64() || root3 == na3 {
		t.Errorf("--root-key: genesis root %s, NA %s; want %s", root3, na3, k.Public().Base64())
	}
	if code := Main(context.Background(), []string{"server", "--memory", "--no-socket", "--http", "127.0.0.1:0", "--root-key", filepath.Join(t.TempDir(), "none.pem")}, bytes.NewReader(nil), &bytes.Buffer{}, &bytes.Buffer{}); code != exitUsage {
		t.Errorf("--root-key with a missing file: exit %d, want %d", code, exitUsage)
	}
}
