package endpoint

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestLocalOnly(t *testing.T) {
	for ep, want := range map[string]bool{
		"unix:///run/x.sock":           true,
		"tcp://127.0.0.1:9000":         true,
		"tcp://[::1]:9000":             true,
		"tcp://0.0.0.0:9000":           true,
		"http://localhost:8080/rpc":    true,
		"http://api.localhost./rpc":    true,
		"tcp://192.0.2.7:9000":         false,
		"https://example.org/jsonrpc":  false,
		"tcp://localhost.example:9000": false,
	} {
		if got := LocalOnly(ep); got != want {
			t.Errorf("LocalOnly(%q) = %v, want %v", ep, got, want)
		}
	}
}

func TestSelfSet(t *testing.T) {
	var s SelfSet
	if s.Contains("tcp://127.0.0.1:9000") {
		t.Fatal("an empty set contains an endpoint")
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "node.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	link := filepath.Join(dir, "link.sock")
	if err := os.Symlink(sock, link); err != nil {
		t.Fatal(err)
	}
	if err := s.Add("unix://"+sock, "tcp://127.0.0.1:9000", ""); err != nil {
		t.Fatal(err)
	}
	for ep, want := range map[string]bool{
		"unix://" + sock:                true,
		"unix://" + link:                true, // the same socket by another name
		"tcp://localhost:9000":          true,
		"http://127.0.0.1:9000/jsonrpc": true,
		"tcp://127.0.0.1:9001":          false,
		"tcp://192.0.2.7:9000":          false, // another machine, same port
		"unix://" + dir + "/other.sock": false,
	} {
		if got := s.Contains(ep); got != want {
			t.Errorf("Contains(%q) = %v, want %v", ep, got, want)
		}
	}
	if err := s.Add("ftp://x"); err == nil {
		t.Error("Add accepted an endpoint Normalize refuses")
	}
}

func TestSocketPrimal(t *testing.T) {
	t.Setenv("FAMILY_ID", "f1")
	for ep, want := range map[string]string{
		"unix:///run/beardog.sock":    "beardog",
		"unix:///run/beardog-f1.sock": "beardog",
		"unix:///run/beardog-f2.sock": "beardog-f2",
		"unix:///run/beardog":         "",
		"tcp://127.0.0.1:9000":        "",
	} {
		if got := SocketPrimal(ep); got != want {
			t.Errorf("SocketPrimal(%q) = %q, want %q", ep, got, want)
		}
	}
}

func TestGone(t *testing.T) {
	refused := &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	if !Gone("unix:///run/x.sock", refused) || !Gone("unix:///run/x.sock", os.NewSyscallError("connect", syscall.ENOENT)) {
		t.Error("a refused or missing Unix socket is not gone")
	}
	if Gone("tcp://127.0.0.1:9", refused) {
		t.Error("a refused TCP dial proves nothing, but Gone says so")
	}
	if Gone("unix:///run/x.sock", errors.New("timeout")) {
		t.Error("a timeout is not gone")
	}
}
