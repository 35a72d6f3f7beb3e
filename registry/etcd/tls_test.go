package etcd_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/etcd"
)

// tlsURL is srv's registry URL under prefix with its CA and client
// certificate, plus extra query parameters.
func tlsURL(srv *etcdtest.Server, prefix string, extra url.Values) string {
	f := srv.TLS()
	q := url.Values{"ca": {f.CA}, "cert": {f.ClientCert}, "key": {f.ClientKey}}
	for k, v := range extra {
		q[k] = v
	}
	return srv.URL() + prefix + "?" + q.Encode()
}

// nodeAt starts a registry node on the store url names.
func nodeAt(t *testing.T, raw string) (*registry.Node, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	st, err := registry.OpenStoreURL(ctx, raw, quiet)
	if err != nil {
		return nil, err
	}
	n, err := registry.NewNode(registry.Config{Store: st, Logger: quiet})
	if err != nil {
		st.Close()
		return nil, err
	}
	t.Cleanup(func() { n.Close(); _ = st.Close() })
	return n, nil
}

// TestRegistryOverTLS: nodes on an etcd that serves TLS only and requires
// client certificates (etcds://…?ca=&cert=&key=) share a registration;
// the same etcd refuses a node without a client certificate, one that
// trusts another CA, and one that speaks plaintext.
func TestRegistryOverTLS(t *testing.T) {
	srv := etcdtest.StartTLS(t)
	a, err := nodeAt(t, tlsURL(srv, "/tls", nil))
	if err != nil {
		t.Fatal(err)
	}
	b, err := nodeAt(t, tlsURL(srv, "/tls", url.Values{"node": {"b"}}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	priv, key := nodeKey(t)
	if _, err := a.Enroll(ctx, key, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Register(ctx, signedAt(t, priv, []string{"tls.check"}, time.Now(), 7443)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(b.Find("tls.check", registry.FindOptions{})) == 1 })

	f := srv.TLS()
	for name, raw := range map[string]string{
		"no client certificate": srv.URL() + "/tls?ca=" + url.QueryEscape(f.CA),
		"another CA":            tlsURL(srv, "/tls", url.Values{"ca": {f.Other}}),
		"plaintext":             "etcd://" + srv.Endpoints()[0] + "/tls",
	} {
		o, err := etcd.ParseURL(raw)
		if err != nil {
			t.Fatal(err)
		}
		o.DialTimeout, o.RequestTimeout, o.Logger = 2*time.Second, 2*time.Second, quiet
		if st, err := etcd.Open(ctx, o); err == nil {
			st.Close()
			t.Errorf("%s: a node was let in", name)
		}
	}
}

// TestRegistryWithEtcdAuth: with etcd's authentication on, a node given
// a user (etcds://user@…) and its password (password_file=) works within
// the prefix its role grants, and not outside it; a wrong password is
// refused. Neither refusal reads as a retryable outage.
func TestRegistryWithEtcdAuth(t *testing.T) {
	srv := etcdtest.StartTLS(t)
	f := srv.TLS()
	enableAuth(t, srv, "capmesh", "s3cret", "/authz/")
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good"), filepath.Join(dir, "bad")
	if err := os.WriteFile(good, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("guess\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	withUser := func(pwFile string) string {
		q := url.Values{"ca": {f.CA}, "cert": {f.ClientCert}, "key": {f.ClientKey}, "password_file": {pwFile}}
		return "etcds://capmesh@" + srv.Endpoints()[0] + "/authz?" + q.Encode()
	}
	// The role is what etcd enforces: another prefix is out of bounds.
	outside := strings.Replace(withUser(good), "/authz?", "/elsewhere?", 1)
	if _, err := nodeAt(t, outside); err == nil || errors.Is(err, registry.ErrUnavailable) {
		t.Errorf("a node outside its role's prefix: %v, want a permission refusal", err)
	}
	a, err := nodeAt(t, withUser(good))
	if err != nil {
		t.Fatal(err)
	}
	b, err := nodeAt(t, withUser(good))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	priv, key := nodeKey(t)
	if _, err := a.Enroll(ctx, key, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Register(ctx, signedAt(t, priv, []string{"auth.check"}, time.Now(), 7444)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(b.Find("auth.check", registry.FindOptions{})) == 1 })

	if _, err := nodeAt(t, withUser(bad)); err == nil {
		t.Error("a node with a wrong password was let in")
	} else if errors.Is(err, registry.ErrUnavailable) {
		t.Errorf("a wrong password reads as a retryable outage: %v", err)
	}
}

// enableAuth turns on etcd's authentication with a root user and a user
// whose role may read and write prefix only.
func enableAuth(t *testing.T, srv *etcdtest.Server, user, password, prefix string) {
	t.Helper()
	f := srv.TLS()
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(pem)
	kp, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{"https://" + srv.Endpoints()[0]}, DialTimeout: deadline,
		TLS: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	steps := []func() error{
		func() error { _, err := c.UserAdd(ctx, "root", "root-"+password); return err },
		func() error { _, err := c.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := c.RoleAdd(ctx, user); return err },
		func() error {
			_, err := c.RoleGrantPermission(ctx, user, prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := c.UserAdd(ctx, user, password); return err },
		func() error { _, err := c.UserGrantRole(ctx, user, user); return err },
		func() error { _, err := c.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("enabling etcd auth, step %d: %v", i, err)
		}
	}
}
