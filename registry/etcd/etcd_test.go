package etcd_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"

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
