package host_test

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry/descriptor"
)

// TestTCPHostAnnouncesTCPEndpoint: a host serving on a Unix socket and on
// TCP, announcing to a node over TCP (a signed registration), puts its TCP
// address in the descriptor — not its Unix socket, which a remote node
// cannot reach and a signed registration refuses.
func TestTCPHostAnnouncesTCPEndpoint(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	got := make(chan *descriptor.Descriptor, 1)
	srv := jsonrpc.NewServer(jsonrpc.Map{"ipc.register": jsonrpc.HandlerFunc(func(_ context.Context, r *jsonrpc.Request) (any, error) {
		var p struct {
			Descriptor json.RawMessage `json:"descriptor"`
		}
		if err := r.UnmarshalParams(&p); err != nil {
			return nil, err
		}
		d, err := descriptor.Parse(p.Descriptor)
		if err != nil {
			return nil, err
		}
		select {
		case got <- d:
		default:
		}
		return map[string]any{"registered": true}, nil
	})}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx, l) }()
	defer func() { cancel(); <-done }()

	h, err := host.New(host.Info{Name: "kvtest", Version: "1.2.3", Domain: "kv"}, &host.Config{Ephemeral: true, Key: testKey, Logger: quietLogger(),
		Socket: filepath.Join(t.TempDir(), "kvtest.sock"), TCP: "127.0.0.1:0", Node: "tcp://" + l.Addr().String()})
	must(t, err)
	must(t, host.Register(h, "kv.get", func(context.Context, struct{}) (string, error) { return "", nil }))
	stop := serve(t, h)
	defer stop()
	select {
	case d := <-got:
		if d.Endpoint.Scheme != "tcp" || net.JoinHostPort(d.Endpoint.Host, strconv.Itoa(d.Endpoint.Port)) != h.Addr("tcp") {
			t.Fatalf("announced %+v, want tcp://%s", d.Endpoint, h.Addr("tcp"))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no signed registration reached the node")
	}
}
