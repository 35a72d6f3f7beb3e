package abuse

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// Bounds the corpus asserts.
const (
	// fdLimit is the node's RLIMIT_NOFILE (set with prlimit when
	// available): the 1,100.
	fdLimit = 1100
	// maxRSS bounds the node's peak resident set (VmHWM) over the attack.
	maxRSS = 256 << 20
	// corpusTime bounds the attack, start to finish (the build excluded).
	corpusTime = 60 * time.Second
	// lineTimeout is the node's --line-timeout.
	lineTimeout = 3 * time.Second
)

// node is a running `capmesh server`.
type node struct {
	cmd            *exec.Cmd
	sock, tcp, web string
	stderr         *bytes.Buffer
	done           chan error
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startNode builds cmd/capmesh and starts `capmesh server` with a private
// XDG_RUNTIME_DIR and XDG_STATE_HOME, as the CLI scripts do.
func startNode(t *testing.T) *node {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "capmesh")
	build := exec.Command("go", "build", "-o", bin, "github.com/capmesh/capmesh/cmd/capmesh")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := filepath.Join(dir, "run")
	if err := os.MkdirAll(run, 0o700); err != nil {
		t.Fatal(err)
	}
	n := &node{tcp: freePort(t), web: freePort(t), stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	_, port, _ := net.SplitHostPort(n.tcp)
	args := []string{bin, "server", "--memory", "--port", port, "--http", n.web,
		"--line-timeout", lineTimeout.String(), "--header-timeout", "2s",
		"--write-timeout", "3s", "--max-reply-bytes", strconv.Itoa(4 << 20)}
	if p, err := exec.LookPath("prlimit"); err == nil {
		args = append([]string{p, fmt.Sprintf("--nofile=%d:%d", fdLimit, fdLimit)}, args...)
	} else {
		t.Logf("prlimit not found: the node runs with the inherited descriptor limit")
	}
	n.cmd = exec.Command(args[0], args[1:]...)
	env := []string{"XDG_RUNTIME_DIR=" + run, "XDG_STATE_HOME=" + filepath.Join(dir, "state")}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "FAMILY_ID" && k != "NODE_ID" && k != "XDG_RUNTIME_DIR" && k != "XDG_STATE_HOME" && k != "BIOMEOS_SOCKET_DIR" {
			env = append(env, kv)
		}
	}
	n.cmd.Env = env
	n.cmd.Stderr = &lockedBuffer{b: n.stderr}
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { n.done <- n.cmd.Wait() }()
	n.sock = filepath.Join(run, "biomeos", "capmesh.sock")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("unix", n.sock); err == nil {
			c.Close()
			if c, err := net.Dial("tcp", n.web); err == nil {
				c.Close()
				break
			}
		}
		select {
		case err := <-n.done:
			t.Fatalf("node exited at start: %v\n%s", err, n.stderr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("node not listening after 30 s\n%s", n.stderr)
		}
	}
	t.Cleanup(func() { n.stop(t) })
	return n
}

type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// stop interrupts the node and checks that it exits cleanly: status 130
// (interrupted, after the drain) and no panic in its log.
func (n *node) stop(t *testing.T) {
	if n.cmd.ProcessState != nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGINT)
	var err error
	select {
	case err = <-n.done:
	case <-time.After(30 * time.Second):
		_ = n.cmd.Process.Kill()
		err = <-n.done
		t.Errorf("node did not stop within 30 s of SIGINT")
	}
	var ee *exec.ExitError
	if err != nil && (!errors.As(err, &ee) || ee.ExitCode() != 130) {
		t.Errorf("node exit: %v", err)
	}
	if bytes.Contains(n.stderr.Bytes(), []byte("panic")) {
		t.Errorf("node log mentions a panic:\n%s", n.stderr)
	}
}

// alive fails the test if the node process has exited.
func (n *node) alive(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(n.cmd.Process.Pid, 0); err != nil {
		t.Fatalf("node is gone: %v\n%s", err, n.stderr)
	}
}

// peakRSS returns the node's VmHWM in bytes.
func (n *node) peakRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.cmd.Process.Pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

// ownerAnswered calls health.liveness as the owner over the Unix socket
// and returns how long the answer took; it fails the test unless the
// answer arrives within 10 s.
func (n *node) ownerAnswered(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	c, err := net.Dial("unix", n.sock)
	if err != nil {
		t.Fatalf("owner dial: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(c, `{"jsonrpc":"2.0","method":"health.liveness","id":"owner"}`+"\n")
	l, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.Contains(l, `"alive":true`) {
		t.Fatalf("owner not answered while the attack is held: %q %v\n%s", l, err, n.stderr)
	}
	return time.Since(start)
}

// conn is a raw client connection.
type conn struct {
	net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, network, addr string) *conn {
	t.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatalf("dial %s: %v", network, err)
	}
	t.Cleanup(func() { c.Close() })
	return &conn{Conn: c, br: bufio.NewReaderSize(c, 1<<16)}
}

// line reads one reply line within 10 s; it must be valid JSON and UTF-8.
func (c *conn) line(t *testing.T) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	l, err := c.br.ReadString('\n')
	if err != nil {
		t.Fatalf("no reply (held or lost): %v (got %.200q)", err, l)
	}
	if !json.Valid([]byte(l)) || !utf8.ValidString(l) {
		t.Fatalf("reply is not valid JSON: %.300q", l)
	}
	return l
}

// untilSentinel sends frame then a ping with a fresh id, and reads replies
// until the ping's; every reply must be valid JSON.
func (c *conn) untilSentinel(t *testing.T, frame []byte, id int) {
	t.Helper()
	sentinel := fmt.Sprintf(`"id":"s%d"`, id)
	msg := append(append(frame, '\n'), fmt.Sprintf(`{"jsonrpc":"2.0","method":"health.liveness","id":"s%d"}`+"\n", id)...)
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(msg); err != nil {
		t.Fatalf("write: %v", err)
	}
	for range 1000 {
		if strings.Contains(c.line(t), sentinel) {
			return
		}
	}
	t.Fatalf("sentinel %d never answered", id)
}

// corpus returns the frames of the hostile corpus: random bytes,
// mutations of valid requests, invalid UTF-8, deep nesting.
func corpus(r *rand.Rand) [][]byte {
	valid := [][]byte{
		[]byte(`{"jsonrpc":"2.0","method":"health.liveness","id":1}`),
		[]byte(`{"jsonrpc":"2.0","method":"capabilities.list","id":"x"}`),
		[]byte(`[{"jsonrpc":"2.0","method":"identity.get","id":2},{"jsonrpc":"2.0","method":"nope"}]`),
		[]byte(`{"jsonrpc":"2.0","method":"ipc.resolve","params":{"name":"a"},"id":null}`),
		[]byte(`{"jsonrpc":"2.0","method":"chp.invoke","params":{"capability_id":"x"},"id":3}`),
	}
	var out [][]byte
	for range 200 { // random bytes, no newline (a newline only splits the frame)
		b := make([]byte, r.IntN(256)+1)
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		out = append(out, bytes.ReplaceAll(b, []byte("\n"), []byte(" ")))
	}
	for range 600 { // mutations: flip, insert, delete, duplicate a span
		b := append([]byte(nil), valid[r.IntN(len(valid))]...)
		for range r.IntN(4) + 1 {
			i := r.IntN(len(b))
			switch r.IntN(4) {
			case 0:
				b[i] ^= byte(1 << r.UintN(8))
			case 1:
				b = append(b[:i], append([]byte{byte(r.UintN(256))}, b[i:]...)...)
			case 2:
				b = append(b[:i], b[i+1:]...)
			default:
				j := min(len(b), i+r.IntN(16))
				b = append(b[:j], append(append([]byte(nil), b[i:j]...), b[j:]...)...)
			}
			if len(b) == 0 {
				b = []byte("{")
			}
		}
		out = append(out, bytes.ReplaceAll(b, []byte("\n"), []byte(" ")))
	}
	out = append(out,
		[]byte("{\"jsonrpc\":\"2.0\",\"method\":\"health.liveness\",\"id\":\"\xff\xfe\"}"),
		bytes.Repeat([]byte("["), 100000),
		[]byte(strings.Repeat(`{"a":`, 20000)+"1"+strings.Repeat("}", 20000)),
		[]byte(`{"jsonrpc":"2.0","method":"health.liveness","params":`+strings.Repeat("[", 12000)+strings.Repeat("]", 12000)+`,"id":4}`),
	)
	return out
}

// TestAbuseCorpus runs the corpus against a real node. See the package
// documentation.
func TestAbuseCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and attacks a real node")
	}
	n := startNode(t)
	start := time.Now()
	base := n.ownerAnswered(t)
	t.Logf("owner answered in %v before the attack; node RSS %d MiB", base, n.peakRSS(t)>>20)

	sendCorpus(t, n)
	hugeFrames(t, n)
	halfCloses(t, n)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slow := slowPeers(ctx, t, n)
	admitted, busy := idleFlood(t, n)
	held := n.ownerAnswered(t)
	rss := n.peakRSS(t)
	t.Logf("attack held: %d flood connections admitted, %d refused busy, %d slow, 4 not reading; owner answered in %v; peak RSS %d MiB",
		admitted, busy, len(slow), held, rss>>20)
	if rss > maxRSS {
		t.Errorf("peak RSS %d MiB exceeds the bound of %d MiB", rss>>20, maxRSS>>20)
	}

	// The line deadline ends every slow message, however it trickles.
	for i, sc := range slow {
		_ = sc.SetReadDeadline(time.Now().Add(lineTimeout + 15*time.Second))
		// A reset is a close too: the node closed while bytes trickled in.
		if _, err := io.Copy(io.Discard, sc); err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("slow connection %d not closed after the line deadline: %v", i, err)
		}
	}
	cancel()
	n.alive(t)
	t.Logf("owner answered in %v after the attack", n.ownerAnswered(t))
	took := time.Since(start)
	t.Logf("corpus ran in %v", took)
	if took > corpusTime {
		t.Errorf("the corpus took %v, over its bound of %v", took, corpusTime)
	}
}

// sendCorpus sends the corpus on a Unix and a TCP connection, each frame
// followed by a ping that must be answered: no crash, no held reply, every
// reply valid JSON.
func sendCorpus(t *testing.T, n *node) {
	frames := corpus(rand.New(rand.NewPCG(15, 2026)))
	for _, tr := range []struct{ network, addr string }{{"unix", n.sock}, {"tcp", n.tcp}} {
		c := dial(t, tr.network, tr.addr)
		for i, f := range frames {
			c.untilSentinel(t, f, i)
		}
	}
	n.alive(t)
}

const capsList = `{"jsonrpc":"2.0","method":"capabilities.list","id":1}`

// hugeFrames sends a batch over --max-batch (refused whole), one within
// it whose replies exceed --max-reply-bytes (the elements over the budget
// get response_too_large), and an oversize frame (answered, then closed).
func hugeFrames(t *testing.T, n *node) {
	c := dial(t, "tcp", n.tcp)
	el := `{"jsonrpc":"2.0","method":"health.liveness","id":1}`
	c.untilSentinel(t, []byte("["+strings.Repeat(el+",", 60000)+el+"]"), -1)
	c.untilSentinel(t, []byte("["+strings.Repeat(capsList+",", 1023)+capsList+"]"), -2)
	big := dial(t, "unix", n.sock)
	go func() { _, _ = big.Write(bytes.Repeat([]byte(" 1"), 3<<20)) }()
	if l := big.line(t); !strings.Contains(l, `"code":-32600`) {
		t.Fatalf("oversize frame: %s", l)
	}
}

// halfCloses sends requests followed by whitespace, some then half-closed:
// the reply is written at once, whatever follows the newline.
func halfCloses(t *testing.T, n *node) {
	for i, tail := range []string{"", "\n", "\r\n", " ", "\t\r\n\n", "\n \n"} {
		hc := dial(t, "unix", n.sock)
		_, _ = fmt.Fprintf(hc, `{"jsonrpc":"2.0","method":"health.liveness","id":%d}`+"\n%s", i, tail)
		if i%2 == 0 {
			_ = hc.Conn.(*net.UnixConn).CloseWrite()
		}
		if l := hc.line(t); !strings.Contains(l, `"alive":true`) {
			t.Fatalf("half-close/tail %q: %s", tail, l)
		}
	}
}

// slowPeers starts 60 slowloris peers — a JSON-RPC line, an HTTP body and
// HTTP headers, each trickling a byte a second until ctx ends — and 4
// peers that send requests and never read. It returns the slowloris
// connections.
func slowPeers(ctx context.Context, t *testing.T, n *node) []*conn {
	var slow []*conn
	for i := range 60 {
		var sc *conn
		switch i % 3 {
		case 0:
			sc = dial(t, "tcp", n.tcp)
			_, _ = io.WriteString(sc, `{"jsonrpc":"2.0","method":`)
		case 1:
			sc = dial(t, "tcp", n.web)
			_, _ = io.WriteString(sc, "POST /jsonrpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
		default:
			sc = dial(t, "tcp", n.web)
			_, _ = io.WriteString(sc, "POST /jsonrpc HTTP/1.1\r\nHost: x\r\n")
		}
		slow = append(slow, sc)
		go trickle(ctx, sc)
	}
	for range 4 { // never read: replies pile up to the reply budget
		nr := dial(t, "unix", n.sock)
		go func() {
			req := []byte(strings.Repeat(capsList+"\n", 64))
			for ctx.Err() == nil {
				_ = nr.SetWriteDeadline(time.Now().Add(time.Second))
				if _, err := nr.Write(req); err != nil {
					return
				}
			}
		}()
	}
	return slow
}

// trickle writes a byte a second to c until ctx ends or a write fails.
func trickle(ctx context.Context, c net.Conn) {
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
			if _, err := c.Write([]byte("x")); err != nil {
				return
			}
		}
	}
}

// idleFlood opens TCP and HTTP connections that stay idle after one call,
// until 50 have been refused busy, and returns the counts.
func idleFlood(t *testing.T, n *node) (admitted, busy int) {
	for i := 0; i < fdLimit && busy < 50; i++ {
		if i%4 == 3 {
			fc := dial(t, "tcp", n.web)
			_, _ = io.WriteString(fc, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
			_ = fc.SetReadDeadline(time.Now().Add(10 * time.Second))
			l, err := fc.br.ReadString('\n')
			switch {
			case strings.HasPrefix(l, "HTTP/1.1 503"):
				busy++
				fc.Close()
			case err == nil:
				admitted++
			default:
				t.Fatalf("HTTP flood connection %d: %q %v", i, l, err)
			}
			continue
		}
		fc := dial(t, "tcp", n.tcp)
		_, _ = io.WriteString(fc, `{"jsonrpc":"2.0","method":"health.liveness","id":1}`+"\n")
		switch l := fc.line(t); {
		case strings.Contains(l, `"code":-32002`):
			busy++
			fc.Close()
		case strings.Contains(l, `"alive":true`):
			admitted++
		default:
			t.Fatalf("flood connection %d: %s", i, l)
		}
	}
	if busy == 0 {
		t.Fatalf("the idle flood of %d connections was never refused", admitted)
	}
	return admitted, busy
}
