package etcd_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/etcd"
	"github.com/capmesh/capmesh/registry/storetest"
)

// open opens a store on srv under a prefix named after dir, so that a
// store reopened on the same dir sees what it held.
func open(t *testing.T, srv *etcdtest.Server, dir string) *etcd.Store {
	t.Helper()
	sum := sha256.Sum256([]byte(dir))
	s, err := etcd.Open(context.Background(), etcd.Options{Endpoints: srv.Endpoints(), Prefix: "/t/" + hex.EncodeToString(sum[:8]) + "/"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestEtcdStore: the store passes the suite every registry store passes.
func TestEtcdStore(t *testing.T) {
	srv := etcdtest.Start(t)
	storetest.Run(t, func(t *testing.T, dir string) registry.Store { return open(t, srv, dir) }, true)
}

// TestParseURL: etcd://host:port[,host:port…][/prefix][?node=…&node_ttl=…];
// a host without a port gets 2379; anything else is refused.
func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in, endpoints, prefix, node string
		ttl                         time.Duration
	}{
		{in: "etcd://h1:2379", endpoints: "h1:2379"},
		{in: "etcd://h1,h2:2380", endpoints: "h1:2379 h2:2380"},
		{in: "etcd://h1:2379/fleet/a", endpoints: "h1:2379", prefix: "/fleet/a/"},
		{in: "etcd://h1:2379/p?node=n1&node_ttl=3s", endpoints: "h1:2379", prefix: "/p/", node: "n1", ttl: 3 * time.Second},
		{in: "etcd://h1?node=n2", endpoints: "h1:2379", node: "n2"},
	} {
		o, err := etcd.ParseURL(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if got := strings.Join(o.Endpoints, " "); got != tc.endpoints || o.Prefix != tc.prefix || o.NodeID != tc.node || o.NodeTTL != tc.ttl {
			t.Errorf("%s: %+v", tc.in, o)
		}
	}
	for _, bad := range []string{"http://h1:2379", "etcd://", "etcd://h1,,h2", "etcd://h1?x=1", "etcd://h1?node_ttl=-1s", "etcd://h1?node_ttl=soon"} {
		if _, err := etcd.ParseURL(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// TestOpenURL: the package registers etcd:// with registry.OpenStoreURL.
func TestOpenURL(t *testing.T) {
	srv := etcdtest.Start(t)
	s, err := registry.OpenStoreURL(context.Background(), srv.URL()+"/open-url?node=n1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if sh, ok := s.(registry.SharedStore); !ok || sh.NodeID() != "n1" {
		t.Fatalf("OpenStoreURL = %T", s)
	}
}
