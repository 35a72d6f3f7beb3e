package conformance_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/conformance"
	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/examples/kvhost/kv"
	"github.com/capmesh/capmesh/host"
)

// TestExampleHost: the example host built with the host library passes
// Level 3 (verified) and every applicable CHP requirement, over its Unix
// socket and over its HTTP binding.
func TestExampleHost(t *testing.T) {
	dir := biomeos(t)
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	sock := filepath.Join(dir, "kvhost.sock")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- kv.Run(ctx, []string{"-socket", sock, "-http", httpAddr, "-memory", "-log-level", "error"}, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-errc:
		case <-time.After(10 * time.Second):
			t.Error("kvhost did not stop")
		}
	})
	addr := endpoint.Address{Scheme: "unix", Path: sock}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := endpoint.DialConn(ctx, addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("kvhost did not start")
		}
	}

	rep := conformance.Audit(ctx, addr, nil)
	var sb strings.Builder
	conformance.WriteReport(&sb, rep)
	if ok, why := rep.Meets(conformance.Requirement{Level: 3, Strict: true}); !ok {
		t.Fatalf("example host: %s\n%s", why, sb.String())
	}
	if rep.CHP == nil || rep.CHP.Binding != "jsonrpc" {
		t.Fatalf("example host does not speak CHP over JSON-RPC:\n%s", sb.String())
	}
	if rep.Announcement != conformance.AnnouncementValid {
		t.Errorf("announcement %s", rep.Announcement)
	}
	if ok, why := rep.Meets(conformance.Requirement{Level: 3, Strict: true, CHP: true}); !ok {
		t.Errorf("example host fails Level 3 + CHP: %s", why)
	}
	for _, f := range rep.Failed() {
		t.Errorf("failed: %s\n%s", f, sb.String())
	}

	hrep := conformance.Audit(ctx, endpoint.Address{Scheme: "http", Host: httpAddr}, nil)
	sb.Reset()
	conformance.WriteReport(&sb, hrep)
	if hrep.CHP == nil || hrep.CHP.Binding != "http" {
		t.Fatalf("example host over HTTP is not audited as CHP:\n%s", sb.String())
	}
	for _, f := range hrep.Suite(conformance.SuiteCHP) {
		if f.Status == conformance.Fail {
			t.Errorf("over HTTP: %s\n%s", f, sb.String())
		}
	}
}

// TestHostWithoutCapabilities: a host that serves the CHP binding but
// declares no capabilities (an infrastructure endpoint such as the capmesh
// node) is reported as hosting none, neither passing nor failing CHP; it
// meets --require-chp on its own (nothing to govern, nothing failed), but a
// gate over it alone fails, since no audited host governs a capability.
func TestHostWithoutCapabilities(t *testing.T) {
	dir := biomeos(t)
	sock := filepath.Join(dir, "empty.sock")
	h, err := host.New(host.Info{Name: "empty", Version: "1.0.0", Domain: "empty"}, &host.Config{Socket: sock, Ephemeral: true, NoAnnounce: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done; _ = h.Close() })
	select {
	case <-h.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("host did not start")
	}
	rep := conformance.Audit(ctx, endpoint.Address{Scheme: "unix", Path: sock}, nil)
	if rep.CHP == nil || !rep.CHP.NoCapabilities || rep.CHP.Failed != 0 {
		t.Fatalf("CHP summary %+v", rep.CHP)
	}
	for _, c := range rep.Suite(conformance.SuiteCHP) {
		if c.Status == conformance.Fail {
			t.Errorf("a host with nothing to govern failed %s", c)
		}
	}
	if ok, why := rep.Meets(conformance.Requirement{CHP: true}); !ok {
		t.Errorf("a host with nothing to govern fails --require-chp: %s", why)
	}
	m := &conformance.MachineReport{Hosts: []*conformance.HostReport{rep}}
	if g := m.Gate(conformance.Requirement{CHP: true}); len(g) != 1 || !strings.Contains(g[0].Reason, "no audited host governs a CHP capability") {
		t.Errorf("gate over the empty host alone: %+v", g)
	}
}
