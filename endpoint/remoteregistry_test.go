package endpoint

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/capmesh/capmesh/internal/nettest"
	"github.com/capmesh/capmesh/jsonrpc"
)

// TestRegistryAnswers: the answers of a registry reached over a Unix
// socket or at an address of this machine are dialled as they are; any
// other registry's under RefuseLocal, where its local-only answers are
// skipped.
func TestRegistryAnswers(t *testing.T) {
	ctx := context.Background()
	for reg, refused := range map[string]bool{
		"/run/capmesh.sock":            false,
		"unix:///run/capmesh.sock":     false,
		"tcp://127.0.0.1:7070":         false,
		"tcp://[::1]:7070":             false,
		"http://localhost:8080":        false,
		"tcp://192.0.2.2:7070":         true,
		"http://198.51.100.7:8080":     true,
		"https://node-b.example:8443/": true,
		"not an endpoint":              true,
	} {
		actx := RegistryAnswers(ctx, reg)
		if got := LocalRefused(actx); got != refused {
			t.Errorf("RegistryAnswers(%q) refuses local: %v, want %v", reg, got, refused)
		}
		for ep, skip := range map[string]bool{"/run/kv.sock": refused, "unix:///run/kv.sock": refused, "tcp://127.0.0.1:9": refused, "tcp://198.51.100.8:9": false} {
			if got := SkipLocal(actx, ep); got != skip {
				t.Errorf("registry %q: SkipLocal(%q) = %v, want %v", reg, ep, got, skip)
			}
		}
	}
}

// otherAddress returns an address of this machine that is neither
// loopback nor link-local — to a dialler it stands for another machine
// (a LAN address is not recognised as this machine's) — or skips.
func otherAddress(t *testing.T) string { return nettest.RoutableIPv4(t) }

// TestDiscoverSkipsLocalAnswersOfRemoteRegistry: with DISCOVERY_SOCKET
// naming a registry on TCP at an address that is not this machine's, a
// Unix socket it answers with is that machine's: Discover does not
// connect to the socket of the same path here (it used to). The same
// registry on loopback is this machine's, and its answer is used.
func TestDiscoverSkipsLocalAnswersOfRemoteRegistry(t *testing.T) {
	host := otherAddress(t)
	discoverEnv(t)
	sock := filepath.Join(t.TempDir(), "kv.sock")
	var conns atomic.Int64
	fakeHost(t, countingListener{unixListen(t, sock), &conns}, "provider", "kv.seal")
	reg := jsonrpc.Map{
		"ipc.resolve": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
			return map[string]any{"primal_id": "provider", "endpoint": "unix://" + sock}, nil
		}),
	}
	remote, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Skip(err)
	}
	serveMap(t, remote, reg)
	t.Setenv("DISCOVERY_SOCKET", "tcp://"+remote.Addr().String())
	c, f, err := Discover(context.Background(), Query{Method: "kv.seal", NoTCP: true})
	if err == nil {
		c.Close()
		t.Fatalf("a registry at %s led to this machine's %s: %+v", remote.Addr(), sock, f)
	}
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Errorf("err = %v, want not found", err)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the socket saw %d connection(s) from the remote registry's answer", n)
	}
	local, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveMap(t, local, reg)
	t.Setenv("DISCOVERY_SOCKET", "tcp://"+local.Addr().String())
	if who, _ := discoverWho(t, Query{Method: "kv.seal", NoTCP: true}); who != "provider" {
		t.Errorf("through the loopback registry: found %q", who)
	}
}

type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}
