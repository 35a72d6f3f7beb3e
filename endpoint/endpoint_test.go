package endpoint

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/jsonrpc/jhttp"
)

func TestParse(t *testing.T) {
	cases := []struct {
		in   string
		want Address
		str  string
	}{
		{"unix:///run/user/1/biomeos/x.sock", Address{Scheme: "unix", Path: "/run/user/1/biomeos/x.sock"}, "unix:///run/user/1/biomeos/x.sock"},
		{"unix:rel.sock", Address{Scheme: "unix", Path: "rel.sock"}, "unix://rel.sock"},
		{"/tmp/a.sock", Address{Scheme: "unix", Path: "/tmp/a.sock"}, "unix:///tmp/a.sock"},
		{"x.sock", Address{Scheme: "unix", Path: "x.sock"}, "unix://x.sock"},
		{"tcp://127.0.0.1:9000", Address{Scheme: "tcp", Host: "127.0.0.1:9000"}, "tcp://127.0.0.1:9000"},
		{"localhost:80", Address{Scheme: "tcp", Host: "localhost:80"}, "tcp://localhost:80"},
		{"http://127.0.0.1:8080", Address{Scheme: "http", Host: "127.0.0.1:8080", Path: "/jsonrpc"}, "http://127.0.0.1:8080/jsonrpc"},
		{"http://h:1/rpc", Address{Scheme: "http", Host: "h:1", Path: "/rpc"}, "http://h:1/rpc"},
	}
	for _, tc := range cases {
		got, err := Parse(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		if got.String() != tc.str {
			t.Errorf("String() = %q, want %q", got.String(), tc.str)
		}
	}
	for _, bad := range []string{"", "ftp://x", "tcp://nohost", "http://", "justaword", "unix://"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

// TestNormalize: a registration's endpoint is Parse's forms in canonical
// form, with an absolute, cleaned socket path and a numeric TCP port.
func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"/run/x/../y.sock":          "unix:///run/y.sock",
		"unix:///run//y.sock":       "unix:///run/y.sock",
		"tcp://127.0.0.1:9000":      "tcp://127.0.0.1:9000",
		"localhost:7700":            "tcp://localhost:7700",
		"[::1]:7700":                "tcp://[::1]:7700",
		"http://127.0.0.1:8080":     "http://127.0.0.1:8080/jsonrpc",
		"https://h:1/rpc":           "https://h:1/rpc",
		"unix:/abs/colon-form.sock": "unix:///abs/colon-form.sock",
		"http://h/%3F":              "http://h/%3F",
		"http://h/a%20b":            "http://h/a%20b",
	} {
		if got, err := Normalize(in); err != nil || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "rel/x.sock", "x.sock", "unix://rel.sock", "unix:rel.sock",
		"tcp://h:http", "h:99999", "tcp://nohost", "ftp://x", "justaword"} {
		if got, err := Normalize(bad); err == nil {
			t.Errorf("Normalize(%q) = %q, want an error", bad, got)
		}
	}
}

func TestSocketPathPlacement(t *testing.T) {
	run := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", run)
	t.Setenv("BIOMEOS_SOCKET_DIR", "")
	t.Setenv("FAMILY_ID", "")
	p, err := SocketPath("capmesh")
	if err != nil || p != filepath.Join(run, "biomeos", "capmesh.sock") {
		t.Fatalf("standalone: %q %v", p, err)
	}
	fi, err := os.Stat(filepath.Join(run, "biomeos"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("biomeos dir mode: %v %v", fi.Mode(), err)
	}
	t.Setenv("FAMILY_ID", "default")
	if p, _ := SocketPath("capmesh"); p != filepath.Join(run, "biomeos", "capmesh.sock") {
		t.Fatalf("FAMILY_ID=default: %q", p)
	}
	t.Setenv("FAMILY_ID", "fam7")
	if p, _ := SocketPath("capmesh"); p != filepath.Join(run, "biomeos", "capmesh-fam7.sock") {
		t.Fatalf("family-scoped: %q", p)
	}
	custom := filepath.Join(t.TempDir(), "sockets")
	t.Setenv("BIOMEOS_SOCKET_DIR", custom)
	t.Setenv("FAMILY_ID", "")
	if p, _ := SocketPath("capmesh"); p != filepath.Join(custom, "capmesh.sock") {
		t.Fatalf("BIOMEOS_SOCKET_DIR: %q", p)
	}
	t.Setenv("BIOMEOS_SOCKET_DIR", "")
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("TMPDIR", t.TempDir())
	dir, fallback, err := SocketDir()
	if err != nil || !fallback || !strings.HasPrefix(filepath.Base(dir), "biomeos-") {
		t.Fatalf("fallback: %q %v %v", dir, fallback, err)
	}
	if _, err := SocketPath("Bad Name"); err == nil {
		t.Fatal("invalid name accepted")
	}
}

func TestListenUnixModesAndSymlink(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "biomeos")
	sock := filepath.Join(dir, "capmesh.sock")
	link := filepath.Join(dir, "mesh.sock")
	l, err := ListenUnix(sock, &UnixOptions{DomainLink: link})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket mode %v %v", fi.Mode(), err)
	}
	di, _ := os.Stat(dir)
	if di.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v", di.Mode())
	}
	target, err := os.Readlink(link)
	if err != nil || target != "capmesh.sock" {
		t.Fatalf("symlink -> %q %v", target, err)
	}
	// Reachable through the symlink.
	c, err := net.Dial("unix", link)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{sock, link} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s not removed on Close: %v", p, err)
		}
	}
}

func TestListenUnixModeFromEnvironment(t *testing.T) {
	t.Setenv("MY_PRIMAL_SOCKET_MODE", "0660")
	sock := filepath.Join(t.TempDir(), "p.sock")
	l, err := ListenUnix(sock, &UnixOptions{EnvName: "my-primal"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fi, _ := os.Stat(sock)
	if fi.Mode().Perm() != 0o660 {
		t.Fatalf("mode %v, want 0660", fi.Mode().Perm())
	}
	t.Setenv("MY_PRIMAL_SOCKET_MODE", "rwx")
	if _, err := ListenUnix(filepath.Join(t.TempDir(), "q.sock"), &UnixOptions{EnvName: "my-primal"}); err == nil || !strings.Contains(err.Error(), "MY_PRIMAL_SOCKET_MODE") {
		t.Fatalf("bad mode accepted: %v", err)
	}
}

func TestStaleAndLiveSockets(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "x.sock")
	// A stale socket: bound, then closed without unlinking.
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ul.SetUnlinkOnClose(false)
	ul.Close()
	if _, err := os.Lstat(sock); err != nil {
		t.Fatal("stale socket file missing:", err)
	}
	l, err := ListenUnix(sock, nil)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	// A live socket is never stolen.
	_, err = ListenUnix(sock, nil)
	if !errors.Is(err, ErrSocketInUse) || !strings.Contains(err.Error(), "another instance") {
		t.Fatalf("live socket: err = %v, want ErrSocketInUse with advice", err)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal("live socket was disturbed:", err)
	}
	c.Close()
	l.Close()
	// A regular file is left alone.
	if err := os.WriteFile(sock, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ListenUnix(sock, nil); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("regular file: %v", err)
	}
	if b, _ := os.ReadFile(sock); string(b) != "data" {
		t.Fatal("regular file was modified")
	}
}

func TestDomainLinkNeverStolenFromLiveSocket(t *testing.T) {
	dir := t.TempDir()
	a, err := ListenUnix(filepath.Join(dir, "a.sock"), &UnixOptions{DomainLink: filepath.Join(dir, "kv.sock")})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := ListenUnix(filepath.Join(dir, "b.sock"), &UnixOptions{DomainLink: filepath.Join(dir, "kv.sock")})
	if err != nil {
		t.Fatal(err)
	}
	if b.DomainLink() != "" {
		t.Fatal("second host took the domain link of a live one")
	}
	if target, _ := os.Readlink(filepath.Join(dir, "kv.sock")); target != "a.sock" {
		t.Fatalf("link -> %q", target)
	}
	b.Close()
	if _, err := os.Lstat(filepath.Join(dir, "kv.sock")); err != nil {
		t.Fatal("closing b removed a's link")
	}
	// After a goes away (without cleanup), a dangling link is replaced.
	a.UnixListener.SetUnlinkOnClose(true)
	a.UnixListener.Close()
	c, err := ListenUnix(filepath.Join(dir, "c.sock"), &UnixOptions{DomainLink: filepath.Join(dir, "kv.sock")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if target, _ := os.Readlink(filepath.Join(dir, "kv.sock")); target != "c.sock" {
		t.Fatalf("stale link not replaced: -> %q", target)
	}
}

func TestDialAllSchemes(t *testing.T) {
	methods := jsonrpc.Map{"ping": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) { return "pong", nil })}
	srv := jsonrpc.NewServer(methods, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ul, err := ListenUnix(filepath.Join(t.TempDir(), "s.sock"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 2)
	go func() { _ = srv.Serve(ctx, ul); done <- struct{}{} }()
	go func() { _ = srv.Serve(ctx, tl); done <- struct{}{} }()
	hs := httptest.NewServer(http.StripPrefix("", jhttp.Handler(srv)))
	defer hs.Close()
	for _, addr := range []string{"unix://" + ul.Path(), ul.Path(), "tcp://" + tl.Addr().String(), hs.URL} {
		c, err := Dial(ctx, addr)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		var s string
		if err := c.Call(ctx, "ping", nil, &s); err != nil || s != "pong" {
			t.Errorf("%s: %q %v", addr, s, err)
		}
		c.Close()
	}
	_, err = Dial(ctx, "unix://"+filepath.Join(t.TempDir(), "none.sock"))
	var de *DialError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "cannot connect to unix://") {
		t.Fatalf("dead socket: %v", err)
	}
	cancel()
	<-done
	<-done
}
