package conformance_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capmesh/capmesh/conformance"
	"github.com/capmesh/capmesh/conformance/fakehost"
	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
)

// machine fills dir with live hosts, dead sockets (a file nobody listens
// on), hung hosts (they accept and never answer), a domain symlink and a
// dangling symlink. It returns the socket paths by kind.
func machine(tb testing.TB, dir string, live, dead, hung int) (liveP, deadP, hungP []string) {
	tb.Helper()
	specs := []string{"own-l3-chp", "broken-uncallable", "broken-health-shape", "broken-transport-claims", "announcement-forgeable"}
	for i := 0; i < live; i++ {
		data, err := os.ReadFile(filepath.Join("testdata/hosts", specs[i%len(specs)]+".txtar"))
		if err != nil {
			tb.Fatal(err)
		}
		s, err := fakehost.ParseSpec(specs[i%len(specs)], data, specDir())
		if err != nil {
			tb.Fatal(err)
		}
		s.Socket = fmt.Sprintf("live%02d.sock", i)
		addr := serve(tb, dir, s)
		liveP = append(liveP, addr.Path)
	}
	for i := 0; i < dead; i++ {
		p := filepath.Join(dir, fmt.Sprintf("dead%02d.sock", i))
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
		if err != nil {
			tb.Fatal(err)
		}
		l.SetUnlinkOnClose(false)
		l.Close()
		deadP = append(deadP, p)
	}
	for i := 0; i < hung; i++ {
		s := &fakehost.Spec{Name: "hung", Behaviour: "hang", Socket: fmt.Sprintf("hung%02d.sock", i)}
		hungP = append(hungP, serve(tb, dir, s).Path)
	}
	if len(liveP) > 0 {
		if err := os.Symlink(filepath.Base(liveP[0]), filepath.Join(dir, "conformance.sock")); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.Symlink("gone.sock", filepath.Join(dir, "dangling.sock")); err != nil {
		tb.Fatal(err)
	}
	return liveP, deadP, hungP
}

// TestAuditAll: 20 sockets, some dead and some that never answer, are
// audited concurrently (every hung host is held open at once, which a
// one-by-one scan could never do), dead sockets and dangling links are
// reported, and a domain symlink is not audited twice. How long a scan
// takes is BenchmarkAuditAll20's business, not a test's.
func TestAuditAll(t *testing.T) {
	dir := biomeos(t)
	live, dead, _ := machine(t, dir, 12, 4, 0)
	held := &gauge{}
	var hung []string
	for i := range 4 {
		hung = append(hung, hangingListener(t, filepath.Join(dir, fmt.Sprintf("hung%02d.sock", i)), held))
	}
	m, err := conformance.AuditAll(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := held.max(); got != len(hung) {
		t.Errorf("at most %d hung hosts were held open at once, want all %d (the scan is not concurrent)", got, len(hung))
	}
	if got := len(m.Hosts); got != 20 {
		t.Fatalf("%d hosts, want 20 (the domain symlink is the same host)", got)
	}
	if len(m.Dead) != len(dead) {
		t.Errorf("dead = %v, want %v", m.Dead, dead)
	}
	if len(m.Dangling) != 1 || !strings.HasSuffix(m.Dangling[0], "dangling.sock") {
		t.Errorf("dangling = %v", m.Dangling)
	}
	byPath := map[string]*conformance.HostReport{}
	for _, h := range m.Hosts {
		byPath[h.Socket.Path] = h
	}
	for _, p := range live {
		if h := byPath[p]; h == nil || !h.Reachable || h.Primal == "" {
			t.Errorf("%s: live host not audited: %+v", p, h)
		}
	}
	if h := byPath[live[0]]; h == nil || len(h.Socket.Links) != 1 || h.Socket.Links[0] != "conformance.sock" {
		t.Errorf("domain symlink not attributed to %s", live[0])
	}
	for _, p := range hung {
		h := byPath[p]
		if h == nil {
			t.Fatalf("%s missing", p)
		}
		if c := h.Check("L1.responds"); c == nil || c.Status != conformance.Fail {
			t.Errorf("%s: hung host should fail L1.responds, got %+v", p, c)
		}
	}
	for _, p := range dead {
		if h := byPath[p]; h == nil || h.Reachable || !strings.Contains(h.Error, "dead socket") {
			t.Errorf("%s: dead socket misreported: %+v", p, h)
		}
	}
	var sb strings.Builder
	if err := conformance.WriteMatrix(&sb, m); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"HOST", "live00.sock", "capmesh-example", "dead socket (stale, nobody listens)", "dangling symlink"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("matrix lacks %q:\n%s", want, sb.String())
		}
	}
}

// gauge counts connections open at once and remembers the peak.
type gauge struct {
	mu       sync.Mutex
	cur, top int
}

func (g *gauge) add(d int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cur += d
	g.top = max(g.top, g.cur)
}

func (g *gauge) max() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.top
}

// hangingListener accepts connections at path and never answers; each
// stays counted in held until the client gives up and closes it.
func hangingListener(t *testing.T, path string, held *gauge) string {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held.add(1)
			wg.Go(func() {
				defer c.Close()
				defer held.add(-1)
				_, _ = io.Copy(io.Discard, c) // until the client closes
			})
		}
	})
	return path
}

// BenchmarkAuditAll20 is the --all figure: 20 sockets (12 live, 4 dead, 4
// that never answer). Its floor is the probe timeout the hung ones must
// wait out (2 s); BenchmarkAuditAllLive16 drops the hung ones, beside
// BenchmarkProbeFloor16, one health.liveness call per socket.
func BenchmarkAuditAll20(b *testing.B) {
	benchAll(b, 12, 4, 4)
}

func BenchmarkAuditAllLive16(b *testing.B) {
	benchAll(b, 12, 4, 0)
}

func benchAll(b *testing.B, live, dead, hung int) {
	dir := benchDir(b)
	machine(b, dir, live, dead, hung)
	b.ResetTimer()
	for b.Loop() {
		if _, err := conformance.AuditAll(context.Background(), dir, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkProbeFloor16(b *testing.B) {
	dir := benchDir(b)
	live, dead, _ := machine(b, dir, 12, 4, 0)
	paths := append(live, dead...)
	b.ResetTimer()
	for b.Loop() {
		var wg sync.WaitGroup
		for _, p := range paths {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				c, err := endpoint.DialAddress(ctx, endpoint.Address{Scheme: "unix", Path: p}, nil)
				cancel()
				if err != nil {
					return
				}
				defer c.Close()
				_ = c.Call(context.Background(), "health.liveness", nil, nil)
			}()
		}
		wg.Wait()
	}
}

func benchDir(b *testing.B) string {
	run := b.TempDir()
	b.Setenv("XDG_RUNTIME_DIR", run)
	dir := filepath.Join(run, "biomeos")
	if err := os.Mkdir(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	return dir
}

var _ jsonrpc.Caller
