package host_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/identity"
)

// TestKeyFileSignsEvidence: a host without a configured key creates its
// key file through identity (mode 0600) and the boundary signs evidence
// with that very key: the bundle exported over the host's Unix socket
// verifies under the key id of the key identity loads from the file.
func TestKeyFileSignsEvidence(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "host.pem")
	h, err := host.New(host.Info{Name: "keytest", Version: "1.0.0"}, &host.Config{
		KeyFile: keyFile, DataDir: dir, Socket: filepath.Join(dir, "s.sock"), NoAnnounce: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	must(t, host.Register(h, "echo.say", func(_ context.Context, in getIn) (string, error) { return in.Key, nil }))
	serve(t, h)
	fi, err := os.Stat(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	ik, created, err := identity.LoadOrCreate(keyFile)
	if err != nil || created {
		t.Fatalf("LoadOrCreate of the host's key file: created %v, %v", created, err)
	}
	if !h.PublicKey().Equal(ik.Ed25519().Public()) {
		t.Fatal("host key differs from the key file's")
	}
	c := dialUnix(t, h.Addr("unix"))
	ctx := context.Background()
	must(t, c.Call(ctx, "echo.say", map[string]any{"key": "x", "_meta": map[string]any{"correlation_id": "k1"}}, nil))
	var bundle json.RawMessage
	must(t, c.Call(ctx, "chp.export", map[string]any{"correlation_id": "k1"}, &bundle))
	v, err := chp.VerifyBundle(bundle, &chp.VerifyOptions{RequireSigned: true, ExpectedKeyID: chp.KeyID(ik.Public().Bytes())})
	if err != nil {
		t.Fatal(err)
	}
	if !v.Valid {
		t.Fatalf("exported bundle does not verify under the key file's key: %+v", v.Checks)
	}
}
