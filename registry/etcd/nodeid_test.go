package etcd_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/internal/logbuf"
	"github.com/capmesh/capmesh/registry/etcd"
)

// TestNodeIDInUseIsRefused: a second node given the node id of a running
// one (a configuration copied between hosts) does not start: before, it
// did, took the first node's local registrations for its own and swept
// them as lapsed (it had no heartbeats of them), so they vanished while
// their hosts were alive. A node killed holds its id until its lease runs
// out (a restart with the same id waits for that); one closed frees it at
// once.
func TestNodeIDInUseIsRefused(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	opts := etcd.Options{Endpoints: srv.Endpoints(), Prefix: "/ids/", NodeID: "web-1", NodeTTL: 2 * time.Second, Logger: quiet}
	first, err := etcd.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := etcd.Open(ctx, opts); !errors.Is(err, etcd.ErrNodeIDInUse) {
		if err == nil {
			st.Close()
		}
		t.Fatalf("a second node of id web-1 while the first runs: %v, want ErrNodeIDInUse", err)
	}
	other := opts
	other.NodeID = "web-2"
	second, err := etcd.Open(ctx, other)
	if err != nil {
		t.Fatalf("another id: %v", err)
	}
	defer second.Close()

	first.Kill() // its lease runs out within NodeTTL
	var logged logbuf.Buffer
	waiting := opts
	waiting.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	restarted, err := etcd.Open(ctx, waiting)
	if err != nil {
		t.Fatalf("web-1 restarted after it was killed: %v", err)
	}
	// A restart that waits says so, rather than seeming to hang.
	if got := logged.String(); !strings.Contains(got, "the node id is held by another lease") {
		t.Errorf("the restart waited for the killed node's lease without a word: %q", got)
	}
	if err := restarted.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := etcd.Open(ctx, opts)
	if err != nil {
		t.Fatalf("web-1 restarted after it was closed: %v", err)
	}
	again.Close()
}
