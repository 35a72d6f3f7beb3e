package kv

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/wire"
)

// startKVHost runs the example exactly as `go run ./examples/kvhost` does,
// on a socket in a temporary directory, and returns a client.
func startKVHost(t *testing.T, args ...string) (*jsonrpc.Client, string) {
	t.Helper()
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir()) // no node to announce to
	sock := filepath.Join(t.TempDir(), "kvhost.sock")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- Run(ctx, append([]string{"-socket", sock, "-memory", "-log-level", "error"}, args...), io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	var c *jsonrpc.Client
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if c, err = jsonrpc.Dial(ctx, "unix", sock, nil); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("kvhost did not start: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c, sock
}

func TestKVHostReachesLevel3(t *testing.T) {
	c, sock := startKVHost(t)
	in, err := wire.Inspect(context.Background(), c, &wire.InspectOptions{Transport: "unix", ProbeMethods: true})
	if err != nil {
		t.Fatal(err)
	}
	if in.Report.Verified != 3 {
		t.Fatalf("verified level %d: %v", in.Report.Verified, in.Report.Reasons())
	}
	if in.Announcement == nil || in.Announcement.Verified == nil {
		t.Fatalf("announcement: %+v", in.Announcement)
	}
	caps := in.Capabilities
	if diff := cmp.Diff([]wire.Consumed{{Name: "crypto.sign_ed25519"}}, caps.Consumed); diff != "" {
		t.Errorf("consumed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"kv.digest", "crypto.sign_ed25519"}, caps.OperationDependencies["kv.seal"]); diff != "" {
		t.Errorf("kv.seal dependencies (-want +got):\n%s", diff)
	}
	if got := caps.CostEstimates["kv.list"].CPU; got != wire.CostMedium {
		t.Errorf("kv.list cost %q", got)
	}
	if l, err := filepath.EvalSymlinks(filepath.Join(filepath.Dir(sock), "kv.sock")); err != nil || l != sock {
		t.Errorf("kv.sock -> %q, %v", l, err)
	}
}

func TestKVOperations(t *testing.T) {
	c, _ := startKVHost(t)
	ctx := context.Background()
	call := func(method string, params, out any) error { return c.Call(ctx, method, params, out) }

	var v Versioned
	if err := call("kv.put", PutIn{Key: "a", Value: "1"}, &v); err != nil || v.Version != 1 {
		t.Fatalf("put: %v %v", v, err)
	}
	var g GetOut
	if err := call("kv.get", KeyIn{Key: "a"}, &g); err != nil || g != (GetOut{Value: "1", Version: 1}) {
		t.Fatalf("get: %v %v", g, err)
	}
	for _, tc := range []struct {
		in   CASIn
		want CASOut
	}{
		{CASIn{Key: "a", Version: 7, Value: "x"}, CASOut{Swapped: false, Version: 1}},
		{CASIn{Key: "a", Version: 1, Value: "2"}, CASOut{Swapped: true, Version: 2}},
		{CASIn{Key: "b", Version: 0, Value: "new"}, CASOut{Swapped: true, Version: 3}},
		{CASIn{Key: "b", Version: 0, Value: "again"}, CASOut{Swapped: false, Version: 3}},
	} {
		var got CASOut
		if err := call("kv.cas", tc.in, &got); err != nil || got != tc.want {
			t.Errorf("cas %+v: %+v %v, want %+v", tc.in, got, err, tc.want)
		}
	}
	var l ListOut
	if err := call("kv.list", ListIn{}, &l); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ListOut{Keys: []string{"a", "b"}}, l); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
	var d DigestOut
	if err := call("kv.digest", KeyIn{Key: "a"}, &d); err != nil || d.SHA256 != "d4735e3a265e16eee03f59718b9b5d03019c07d8b6c51f90da3a666eec13ab35" {
		t.Errorf("digest of \"2\": %+v %v", d, err)
	}
	var deleted bool
	if err := call("kv.delete", KeyIn{Key: "a"}, &deleted); err != nil || !deleted {
		t.Errorf("delete: %v %v", deleted, err)
	}
	err := call("kv.get", KeyIn{Key: "a"}, nil)
	if code, _ := jsonrpc.ErrorCode(err); code != CodeNotFound {
		t.Errorf("get after delete: %v", err)
	}
	for _, bad := range []any{map[string]any{}, map[string]any{"key": "", "value": "v"}, map[string]any{"key": "k", "value": 1}} {
		if err := call("kv.put", bad, nil); !errors.Is(err, jsonrpc.InvalidParams) {
			t.Errorf("put %v: %v, want invalid params", bad, err)
		}
	}
}

func TestExpiry(t *testing.T) {
	s := NewStore()
	now := time.Unix(1000, 0)
	s.now = func() time.Time { return now }
	ctx := context.Background()
	if _, err := s.Put(ctx, PutIn{Key: "t", Value: "v", TTLMS: 1500}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(1499 * time.Millisecond)
	if _, err := s.Get(ctx, KeyIn{Key: "t"}); err != nil {
		t.Errorf("before expiry: %v", err)
	}
	now = now.Add(time.Millisecond)
	if _, err := s.Get(ctx, KeyIn{Key: "t"}); !errors.Is(err, CodeNotFound) {
		t.Errorf("at expiry: %v", err)
	}
}

// TestSealConsumesASigner runs kv.seal against a signer host built with the
// same library, reached directly with -signer.
func TestSealConsumesASigner(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(nil)
	signerSock := filepath.Join(t.TempDir(), "signer.sock")
	sh, err := host.New(host.Info{Name: "signer", Version: "0.1.0", Domain: "crypto"},
		&host.Config{Socket: signerSock, Ephemeral: true, NoAnnounce: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	type signIn struct {
		Message string `json:"message"`
	}
	type signOut struct {
		Signature string `json:"signature"`
		PublicKey string `json:"public_key"`
	}
	if err := host.Register(sh, "crypto.sign_ed25519", func(_ context.Context, in signIn) (signOut, error) {
		msg, err := base64.StdEncoding.DecodeString(in.Message)
		if err != nil {
			return signOut{}, jsonrpc.Errorf(jsonrpc.InvalidParams, "message: %v", err)
		}
		return signOut{
			Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(priv, msg)),
			PublicKey: base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey)),
		}, nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sh.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	<-sh.Ready()

	c, _ := startKVHost(t, "-signer", "unix://"+signerSock)
	if err := c.Call(ctx, "kv.put", PutIn{Key: "doc", Value: "contents"}, nil); err != nil {
		t.Fatal(err)
	}
	var s SealOut
	if err := c.Call(ctx, "kv.seal", KeyIn{Key: "doc"}, &s); err != nil {
		t.Fatal(err)
	}
	digest, _ := hex.DecodeString(s.SHA256)
	sig, _ := base64.StdEncoding.DecodeString(s.Signature)
	if !ed25519.Verify(priv.Public().(ed25519.PublicKey), digest, sig) {
		t.Errorf("seal signature does not verify: %+v", s)
	}
	pub, _ := base64.StdEncoding.DecodeString(s.PublicKey)
	if !bytes.Equal(pub, priv.Public().(ed25519.PublicKey)) {
		t.Errorf("public key %s", s.PublicKey)
	}
}

func TestSealWithoutSignerIsAClearFailure(t *testing.T) {
	c, _ := startKVHost(t, "-signer", "unix://"+filepath.Join(t.TempDir(), "nobody.sock"))
	ctx := context.Background()
	if err := c.Call(ctx, "kv.put", PutIn{Key: "k", Value: "v"}, nil); err != nil {
		t.Fatal(err)
	}
	err := c.Call(ctx, "kv.seal", KeyIn{Key: "k"}, nil)
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != CodeUnavailable {
		t.Fatalf("seal without signer: %v", err)
	}
}

func TestRunUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"-bogus"}, {"extra"}, {"-log-level", "loud"}, {"-name", "Bad Name", "-memory"}} {
		var ue usageError
		if err := Run(context.Background(), args, io.Discard); !errors.As(err, &ue) {
			t.Errorf("Run %v: %v, want a usage error", args, err)
		}
	}
}
