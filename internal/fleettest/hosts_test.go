package fleettest

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/capmesh/capmesh/chp/boundary"
	_ "github.com/capmesh/capmesh/evidence/postgres" // postgres:// for EvidenceURL
	"github.com/capmesh/capmesh/host"
)

// fleetHost is a host of the fleet: the host library on a Unix socket of
// its own, one capability <name>.echo, its evidence in the fleet's
// database.
type fleetHost struct {
	h    *host.Host
	name string
	sock string
	stop context.CancelFunc
	done chan error
}

// startHost serves host name, announcing itself to the node at nodeSock
// unless nodeSock is "" (the test registers it by hand).
func startHost(t *testing.T, name, nodeSock, evidenceURL string) *fleetHost {
	t.Helper()
	sock := filepath.Join(t.TempDir(), name+".sock")
	cfg := &host.Config{Socket: sock, NoDomainLink: true, Ephemeral: true, EvidenceURL: evidenceURL,
		Node: nodeSock, NoAnnounce: nodeSock == "", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		CHP: boundary.Config{Safety: boundary.FixtureSafety()}}
	h, err := host.New(host.Info{Name: name, Version: "1.0.0", Domain: name, License: "MIT"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	type in struct {
		Value string `json:"value"`
	}
	if err := host.Register(h, name+".echo", func(_ context.Context, in in) (string, error) { return in.Value, nil }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	fh := &fleetHost{h: h, name: name, sock: sock, stop: cancel, done: make(chan error, 1)}
	go func() { fh.done <- h.Serve(ctx) }()
	select {
	case <-h.Ready():
	case err := <-fh.done:
		t.Fatalf("host %s: %v", name, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("host %s not ready after 30 s", name)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-fh.done:
		case <-time.After(30 * time.Second):
			t.Errorf("host %s did not stop", name)
		}
	})
	return fh
}

// register registers the host by hand through node n (an unsigned local
// registration, as a host's announcement makes).
func (fh *fleetHost) register(ctx context.Context, n *node) error {
	var out map[string]any
	return n.call(ctx, "ipc.register", map[string]any{"name": fh.name, "capabilities": []string{fh.name, fh.name + ".echo"},
		"endpoint": "unix://" + fh.sock}, &out)
}
