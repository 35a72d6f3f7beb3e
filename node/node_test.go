package node_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/node"
	"github.com/capmesh/capmesh/registry"
)

// env gives the test its own socket and state directories.
func env(t *testing.T) (runDir string) {
	t.Helper()
	dir := t.TempDir()
	runDir = filepath.Join(dir, "run")
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", runDir)
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	t.Setenv("FAMILY_ID", "")
	t.Setenv("FAMILY_SEED", "")
	return runDir
}

// TestStartRoutesToARegisteredHost starts a whole node in process — Unix
// socket, TCP, HTTP — registers a host built with the host library, and
// calls the host's capability through the node's router, over the node's
// socket and over TCP; Stop then drains it and removes its socket.
func TestStartRoutesToARegisteredHost(t *testing.T) {
	runDir := env(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Memory: true, TCP: "127.0.0.1:0", HTTP: "127.0.0.1:0", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	sock := n.Addr("unix")
	if filepath.Dir(sock) != filepath.Join(runDir, "biomeos") || n.Addr("tcp") == "" || n.Addr("http") == "" {
		t.Fatalf("addresses: unix %q tcp %q http %q", sock, n.Addr("tcp"), n.Addr("http"))
	}

	h, err := host.New(host.Info{Name: "echoer", Version: "1.0.0", Domain: "echo"}, &host.Config{Ephemeral: true, Node: "unix://" + sock})
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Register(h, "echo.say", func(_ context.Context, in struct{ Text string }) (string, error) {
		return "echo: " + in.Text, nil
	}); err != nil {
		t.Fatal(err)
	}
	hctx, hcancel := context.WithCancel(ctx)
	hdone := make(chan error, 1)
	go func() { hdone <- h.Serve(hctx) }()
	stopHost := sync.OnceFunc(func() { hcancel(); <-hdone })
	defer stopHost()

	// The host registers itself; wait until the registry lists it.
	for len(n.Registry().Find("echo.say", registry.FindOptions{})) == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the host never appeared in the registry")
		case <-time.After(20 * time.Millisecond):
		}
	}
	// Over the node's socket the caller is the host's own user: served.
	// Over TCP the caller is anonymous, and the node says so to the host,
	// which serves only its own user: refused (docs/access.md).
	for _, tc := range []struct {
		addr string
		code jsonrpc.Code
	}{{"unix://" + sock, 0}, {"tcp://" + n.Addr("tcp"), jsonrpc.Code(-32001)}} {
		c, err := endpoint.Dial(ctx, tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = c.Call(ctx, "echo.say", map[string]any{"Text": "hi"}, &got)
		c.Close()
		var je *jsonrpc.Error
		switch {
		case tc.code == 0 && (err != nil || got != "echo: hi"):
			t.Fatalf("%s: routed call answered %q, %v", tc.addr, got, err)
		case tc.code != 0 && (!errors.As(err, &je) || je.Code != tc.code):
			t.Fatalf("%s: routed call: %v, want code %d", tc.addr, err, tc.code)
		}
	}

	stopHost()
	if err := n.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left behind: %v", err)
	}
	if err := n.Wait(); err != nil {
		t.Fatalf("Wait after Stop: %v", err)
	}
}

// TestStateLocked: a second node on the same state directory is refused
// with ErrStateLocked (the CLI's exit 1), and the first keeps serving.
func TestStateLocked(t *testing.T) {
	env(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	first, err := node.Start(ctx, node.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Stop(ctx)
	_, err = node.Start(ctx, node.Config{Socket: filepath.Join(t.TempDir(), "second.sock")})
	if !errors.Is(err, node.ErrStateLocked) {
		t.Fatalf("second node on the same state: %v", err)
	}
	c, err := endpoint.Dial(ctx, "unix://"+first.Addr("unix"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Call(ctx, "health.liveness", nil, nil); err != nil {
		t.Fatalf("first node after the refusal: %v", err)
	}
}

// TestConfigErrors: a Config the node cannot run is a ConfigError.
func TestConfigErrors(t *testing.T) {
	env(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, cfg := range map[string]node.Config{
		"nothing to listen on": {Memory: true, NoSocket: true},
		"missing root key":     {Memory: true, RootKeyFile: filepath.Join(t.TempDir(), "absent.pem")},
		"bad name":             {Memory: true, Name: "no/slash"},
	} {
		_, err := node.Start(ctx, cfg)
		var ce *node.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%s: %v, want a ConfigError", name, err)
		}
	}
}

// TestRouterDiscoversUnregisteredHosts: a call no registered provider
// takes is served by a host found in the node's own socket directory (the
// IPC protocol's discovery order), unless NoDiscovery keeps the router to
// registrations.
func TestRouterDiscoversUnregisteredHosts(t *testing.T) {
	env(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := host.New(host.Info{Name: "echoer", Version: "1.0.0", Domain: "echo"}, &host.Config{Ephemeral: true, NoAnnounce: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Register(h, "echo.say", func(_ context.Context, in struct{ Text string }) (string, error) {
		return "echo: " + in.Text, nil
	}); err != nil {
		t.Fatal(err)
	}
	hctx, hcancel := context.WithCancel(ctx)
	hdone := make(chan error, 1)
	go func() { hdone <- h.Serve(hctx) }()
	defer func() { hcancel(); <-hdone }()
	<-h.Ready()

	for _, noDiscovery := range []bool{false, true} {
		n, err := node.Start(ctx, node.Config{Memory: true, NoDiscovery: noDiscovery})
		if err != nil {
			t.Fatal(err)
		}
		c, err := endpoint.Dial(ctx, "unix://"+n.Addr("unix"))
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = c.Call(ctx, "echo.say", map[string]any{"Text": "found"}, &got)
		c.Close()
		switch {
		case !noDiscovery && (err != nil || got != "echo: found"):
			t.Errorf("discovered host: %q, %v", got, err)
		case noDiscovery && err == nil:
			t.Errorf("NoDiscovery: the unregistered host was reached (%q)", got)
		}
		if err := n.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
