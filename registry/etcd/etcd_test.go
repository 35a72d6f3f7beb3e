package etcd_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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

// TestParseURL: etcd[s]://[user@]host:port[,host:port…][/prefix][?…];
// a host without a port gets 2379; a password in the URL, an unknown
// parameter or a bad value is refused (with the password not repeated).
func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want etcd.Options
	}{
		{"etcd://h1:2379", etcd.Options{Endpoints: []string{"h1:2379"}}},
		{"etcd://h1,h2:2380", etcd.Options{Endpoints: []string{"h1:2379", "h2:2380"}}},
		{"etcd://h1:2379/fleet/a", etcd.Options{Endpoints: []string{"h1:2379"}, Prefix: "/fleet/a/"}},
		{"etcd://h1:2379/p?node=n1&node_ttl=3s", etcd.Options{Endpoints: []string{"h1:2379"}, Prefix: "/p/", NodeID: "n1", NodeTTL: 3 * time.Second}},
		{"etcd://h1?node=n2", etcd.Options{Endpoints: []string{"h1:2379"}, NodeID: "n2"}},
		{"etcd://10.0.0.5?insecure=1", etcd.Options{Endpoints: []string{"10.0.0.5:2379"}, Insecure: true}},
		{"etcds://e1,e2:2390/reg?ca=/etc/ca.pem&cert=/etc/n.pem&key=/etc/n-key.pem",
			etcd.Options{Endpoints: []string{"e1:2379", "e2:2390"}, Prefix: "/reg/", TLS: true, CAFile: "/etc/ca.pem", CertFile: "/etc/n.pem", KeyFile: "/etc/n-key.pem"}},
		{"etcds://capmesh@e1:2379?ca=ca.pem&password_file=/run/secrets/etcd",
			etcd.Options{Endpoints: []string{"e1:2379"}, TLS: true, CAFile: "ca.pem", Username: "capmesh", PasswordFile: "/run/secrets/etcd"}},
		{"etcds://web%2B1@e1", etcd.Options{Endpoints: []string{"e1:2379"}, TLS: true, Username: "web+1"}},
		{"etcds://[::1]:2379", etcd.Options{Endpoints: []string{"[::1]:2379"}, TLS: true}},
	} {
		o, err := etcd.ParseURL(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, o); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.in, diff)
		}
	}
	for _, bad := range []string{"http://h1:2379", "etcd://", "etcd://h1,,h2", "etcd://h1?x=1", "etcd://h1?node_ttl=-1s", "etcd://h1?node_ttl=soon",
		"etcds://h1?ca=", "etcd://h1?insecure=yes", "etcds://@h1", "etcds://u:hunter2@h1", "etcds://u:@h1"} {
		_, err := etcd.ParseURL(bad)
		if err == nil {
			t.Errorf("%s: accepted", bad)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error shows the password: %v", bad, err)
		}
	}
}

// TestExposureRule: beyond loopback the node talks to etcd over TLS and
// authenticates (a client certificate or a user), unless insecure=1; on
// loopback plaintext is fine. TLS files need etcds://, a certificate its
// key, a user a password (from the file, else the environment), and a
// password a user.
func TestExposureRule(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(etcd.EnvPassword, "")
	for _, tc := range []struct {
		url, refusal string // refusal: a fragment of the error, "" to accept
	}{
		{"etcd://127.0.0.1:2379", ""},
		{"etcd://localhost,[::1]:2379", ""},
		{"etcd://10.0.0.5:2379", "connect over TLS"},
		{"etcd://127.0.0.1,10.0.0.5", "connect over TLS"},
		{"etcd://10.0.0.5:2379?insecure=1", ""},
		{"etcds://10.0.0.5:2379", "authenticate the node"},
		{"etcds://10.0.0.5:2379?insecure=1", ""},
		{"etcds://127.0.0.1:2379", ""},
		{"etcds://capmesh@10.0.0.5?password_file=" + pw, ""},
		{"etcds://capmesh@10.0.0.5", "has no password"},
		{"etcds://10.0.0.5?password_file=" + pw, "without a user"},
		{"etcds://capmesh@10.0.0.5?password_file=" + filepath.Join(dir, "missing"), "password_file"},
		{"etcd://127.0.0.1?ca=" + pw, "use etcds://"},
		{"etcds://10.0.0.5?cert=" + pw, "both cert and key"},
		{"etcds://127.0.0.1?ca=" + pw, "no PEM certificate"},
	} {
		o, err := etcd.ParseURL(tc.url)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		cfg, err := o.ClientConfig()
		switch {
		case tc.refusal == "" && err != nil:
			t.Errorf("%s: %v", tc.url, err)
		case tc.refusal != "" && (err == nil || !strings.Contains(err.Error(), tc.refusal)):
			t.Errorf("%s: %v, want a refusal saying %q", tc.url, err, tc.refusal)
		case err == nil && strings.HasPrefix(tc.url, "etcds") && (cfg.TLS == nil || !strings.HasPrefix(cfg.Endpoints[0], "https://")):
			t.Errorf("%s: not TLS: %+v", tc.url, cfg.Endpoints)
		case err == nil && o.Username != "" && cfg.Password != "s3cret":
			t.Errorf("%s: password %q, want the file's first line", tc.url, cfg.Password)
		}
	}
	t.Setenv(etcd.EnvPassword, "from-env")
	o, _ := etcd.ParseURL("etcds://capmesh@10.0.0.5")
	if cfg, err := o.ClientConfig(); err != nil || cfg.Username != "capmesh" || cfg.Password != "from-env" {
		t.Errorf("password from %s: %q, %v", etcd.EnvPassword, cfg.Password, err)
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
