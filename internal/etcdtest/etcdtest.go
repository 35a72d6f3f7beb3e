// Package etcdtest gives a test a real, private etcd server: a single
// member in a temporary directory, on loopback ports of its own, stopped
// and removed when the test ends (t.Cleanup).
//
// The server is the binary CAPMESH_ETCD_BIN names (CI builds it once,
// .ci/run), else the etcd of go.etcd.io/etcd/server/v3/embed built from
// the test-only module in etcdserver/ on first use and cached under the
// user's cache directory (docs/DECISIONS.md says why this one and not the
// Debian package). Debian's /usr/bin/etcd takes the same flags and may be
// named instead.
//
// A test skips with the reason when no server can be started, unless
// CAPMESH_REQUIRE_ETCD=1 (CI), where it fails.
//
// The package uses the standard library only: readiness is etcd's
// /health endpoint, so a test helper does not pull the etcd client.
package etcdtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EnvBin names an etcd server binary to run instead of building one.
const EnvBin = "CAPMESH_ETCD_BIN"

// EnvRequire, set to 1, turns a server that cannot be started into a test
// failure instead of a skip.
const EnvRequire = "CAPMESH_REQUIRE_ETCD"

// Server is a running private etcd.
type Server struct {
	dir        string
	bin        string
	clientAddr string // host:port
	peerAddr   string
	mu         sync.Mutex
	cmd        *exec.Cmd
	exited     chan struct{}
	log        *lockedBuffer
	tls        *TLSFiles // StartTLS's; nil: plaintext
}

// Start starts a private etcd for t and stops it when t ends. It skips t
// (or fails it under CAPMESH_REQUIRE_ETCD=1) when no server can be had.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err == nil {
		var s *Server
		if s, err = start(bin); err == nil {
			t.Cleanup(s.Stop)
			return s
		}
	}
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("etcd required (%s=1) but not available: %v", EnvRequire, err)
	}
	t.Skipf("etcd not available, skipping: %v", err)
	return nil
}

// Endpoints are the client endpoints (host:port) for clientv3.Config.
func (s *Server) Endpoints() []string { return []string{s.clientAddr} }

// URL is the server as a capmesh registry URL: etcd://host:port, or
// etcds://host:port for a TLS server (whose files TLS names).
func (s *Server) URL() string {
	if s.tls != nil {
		return "etcds://" + s.clientAddr
	}
	return "etcd://" + s.clientAddr
}

// Stop stops the server (SIGTERM, then SIGKILL after 10 s) and removes
// its directory. It may be called more than once.
func (s *Server) Stop() {
	s.halt(syscall.SIGTERM)
	os.RemoveAll(s.dir)
}

// Pause stops the server and keeps its data, so that Resume starts it
// again on the same ports with the same data (etcd unreachable, then
// back).
func (s *Server) Pause() { s.halt(syscall.SIGTERM) }

// Resume restarts a paused server and waits until it is healthy.
func (s *Server) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run()
}

func (s *Server) halt(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

// Binary returns the etcd server to run: CAPMESH_ETCD_BIN, else the
// test-only etcdserver module built (once per source version) into the
// user's cache directory.
func Binary() (string, error) {
	if b := os.Getenv(EnvBin); b != "" {
		if _, err := os.Stat(b); err != nil {
			return "", fmt.Errorf("%s: %w", EnvBin, err)
		}
		return b, nil
	}
	buildOnce.Do(func() { built, buildErr = build() })
	return built, buildErr
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// build compiles etcdserver/ unless a binary of the same sources is in
// the cache. Concurrent test binaries may both build; each renames its
// own result into place, so a reader never sees half a file.
func build() (string, error) {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("etcdtest: cannot locate the etcdserver sources")
	}
	src := filepath.Join(filepath.Dir(self), "etcdserver")
	h := sha256.New()
	for _, f := range []string{"main.go", "go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return "", fmt.Errorf("etcdtest: %w (set %s to an etcd binary)", err, EnvBin)
		}
		h.Write(b)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "capmesh-etcdtest")
	bin := filepath.Join(dir, "etcd-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("etcdtest: building %s: %w\n%s(or set %s to an etcd binary, such as Debian's /usr/bin/etcd)", src, err, out, EnvBin)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// start runs bin on two free loopback ports; a port taken between the
// pick and the bind is retried on new ones.
func start(bin string) (*Server, error) {
	dir, err := os.MkdirTemp("", "capmesh-etcd-")
	if err != nil {
		return nil, err
	}
	return startIn(bin, dir, nil)
}

// startIn is start in dir, serving TLS with files when they are set.
func startIn(bin, dir string, files *TLSFiles) (*Server, error) {
	var last, err error
	for range 3 {
		s := &Server{dir: dir, bin: bin, tls: files}
		if s.clientAddr, err = freePort(); err != nil {
			break
		}
		if s.peerAddr, err = freePort(); err != nil {
			break
		}
		if last = s.run(); last == nil {
			return s, nil
		}
		os.RemoveAll(filepath.Join(dir, "data"))
	}
	os.RemoveAll(dir)
	if err != nil {
		return nil, err
	}
	return nil, last
}

// run starts the process on the server's ports and waits for /health;
// the caller holds mu (or owns s alone).
func (s *Server) run() error {
	_, scheme := s.httpClient()
	client, peer := scheme+s.clientAddr, "http://"+s.peerAddr
	args := []string{"--name", "capmesh-test", "--data-dir", filepath.Join(s.dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "capmesh-test=" + peer, "--log-level", "error"}
	if s.tls != nil {
		args = append(args, "--cert-file", s.tls.serverCert, "--key-file", s.tls.serverKey,
			"--trusted-ca-file", s.tls.CA, "--client-cert-auth")
	}
	cmd := exec.Command(s.bin, args...)
	s.log = &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("etcdtest: %w", err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(s.exited)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.waitHealthy(ctx); err != nil {
		_ = cmd.Process.Kill()
		<-s.exited
		s.cmd = nil
		return fmt.Errorf("etcdtest: %s did not become healthy: %w\n%s", s.bin, err, s.log.String())
	}
	return nil
}

func (s *Server) waitHealthy(ctx context.Context) error {
	hc, scheme := s.httpClient()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, scheme+s.clientAddr+"/health", nil)
		resp, err := hc.Do(req)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.Contains(b, []byte(`"true"`)) {
				return nil
			}
			err = fmt.Errorf("/health: %s %s", resp.Status, strings.TrimSpace(string(b)))
		}
		select {
		case <-s.exited:
			return errors.New("the server exited")
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil // keep the start; a test reads it on failure
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// gateway calls etcd's JSON gateway (/v3/…) with body and decodes the
// answer into out.
func (s *Server) gateway(path string, body, out any) error {
	b, _ := json.Marshal(body)
	hc, scheme := s.httpClient()
	hc.Timeout = 30 * time.Second // a compaction may take a while on a loaded machine
	resp, err := hc.Post(scheme+s.clientAddr+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s %s", path, resp.Status, raw)
	}
	return json.Unmarshal(raw, out)
}

// Revision is the server's current revision.
func (s *Server) Revision(t testing.TB) uint64 {
	t.Helper()
	var out struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	if err := s.gateway("/v3/kv/range", map[string]any{"key": "AA==", "limit": 1}, &out); err != nil {
		t.Fatal(err)
	}
	r, err := strconv.ParseUint(out.Header.Revision, 10, 64)
	if err != nil {
		t.Fatalf("etcd revision %q: %v", out.Header.Revision, err)
	}
	return r
}

// Compact compacts the server's history up to its current revision: a
// watch from an older revision fails as compacted.
func (s *Server) Compact(t testing.TB) {
	t.Helper()
	rev := s.Revision(t)
	var out map[string]any
	if err := s.gateway("/v3/kv/compaction", map[string]any{"revision": strconv.FormatUint(rev, 10), "physical": true}, &out); err != nil {
		t.Fatal(err)
	}
}
