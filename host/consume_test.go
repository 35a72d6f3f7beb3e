package host_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/host"
)

// TestProviderWithoutNode: with no node running, a consuming host reaches
// a provider through its domain symlink (crypto.sock), and never takes
// its own socket for a provider.
func TestProviderWithoutNode(t *testing.T) {
	dir, err := os.MkdirTemp("", "cmprov")
	must(t, err)
	defer os.RemoveAll(dir)
	t.Setenv("BIOMEOS_SOCKET_DIR", dir)
	t.Setenv("FAMILY_ID", "")
	t.Setenv("DISCOVERY_SOCKET", "")
	t.Setenv("CRYPTO_SOCKET", "")
	t.Setenv("KV_SOCKET", "")

	signer, err := host.New(host.Info{Name: "signer", Version: "1.0.0", Domain: "crypto"},
		&host.Config{Ephemeral: true, NoAnnounce: true, Key: testKey, Logger: quietLogger(), Socket: filepath.Join(dir, "signer.sock")})
	must(t, err)
	must(t, host.Register(signer, "crypto.sign", func(context.Context, struct{}) (string, error) { return "signed", nil }))
	defer serve(t, signer)()

	kv, err := host.New(host.Info{Name: "kvstore", Version: "1.0.0", Domain: "kv"},
		&host.Config{Ephemeral: true, NoAnnounce: true, Key: testKey, Logger: quietLogger(), Socket: filepath.Join(dir, "kvstore.sock")})
	must(t, err)
	must(t, host.Register(kv, "kv.get", func(context.Context, struct{}) (string, error) { return "", nil }))
	defer serve(t, kv)()

	ctx := context.Background()
	c, err := kv.Provider(ctx, "crypto.sign")
	must(t, err)
	defer c.Close()
	var out string
	must(t, c.Call(ctx, "crypto.sign", map[string]any{}, &out))
	if out != "signed" {
		t.Fatalf("crypto.sign = %q", out)
	}
	if c, err := kv.Provider(ctx, "kv.get"); err == nil || !strings.Contains(err.Error(), "own socket") {
		if c != nil {
			c.Close()
		}
		t.Fatalf("Provider(kv.get) on the kv host: %v", err)
	}
}
