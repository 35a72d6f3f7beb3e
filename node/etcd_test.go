package node_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/node"
	"github.com/capmesh/capmesh/registry"
	_ "github.com/capmesh/capmesh/registry/etcd" // etcd:// for RegistryURL
)

// TestNodesShareARegistryOnEtcd: two nodes started with one RegistryURL
// share the genesis (root and authority keys from the store) and the
// registry: a host that registers on the first is found on the second,
// keyed by its owner node, and a call to the second's socket is routed to
// it.
func TestNodesShareARegistryOnEtcd(t *testing.T) {
	runDir := env(t)
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := func(name string) *node.Node {
		n, err := node.Start(ctx, node.Config{Name: name, NoDomainLink: true, Memory: true, RegistryURL: srv.URL(),
			Socket: filepath.Join(runDir, name+".sock")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Stop(context.Background()) })
		return n
	}
	a, b := start("node-a"), start("node-b")
	if a.Registry().RootPublicKey() != b.Registry().RootPublicKey() || a.Registry().AuthorityPublicKey() != b.Registry().AuthorityPublicKey() {
		t.Fatal("the two nodes do not share the genesis keys")
	}

	h, err := host.New(host.Info{Name: "echoer", Version: "1.0.0", Domain: "echo"}, &host.Config{Ephemeral: true, Socket: filepath.Join(runDir, "echoer.sock"), Node: "unix://" + a.Addr("unix")})
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

	var found []registry.Entry
	for len(found) == 0 {
		found = b.Registry().Find("echo.say", registry.FindOptions{})
		select {
		case <-ctx.Done():
			t.Fatal("the host registered on a never appeared on b")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if !strings.HasPrefix(found[0].Key, "local:echoer@") {
		t.Errorf("b's entry key %q, want local:echoer@<a's node id>", found[0].Key)
	}
	c, err := endpoint.Dial(ctx, "unix://"+b.Addr("unix"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got string
	if err := c.Call(ctx, "echo.say", map[string]any{"Text": "hi"}, &got); err != nil || got != "echo: hi" {
		t.Fatalf("routed through b: %q, %v", got, err)
	}
}
