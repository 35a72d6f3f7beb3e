package fleettest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/capmesh/capmesh/internal/logbuf"
	"github.com/capmesh/capmesh/jsonrpc"
)

// binBuilt records that a test asked for the binary, so that TestMain
// removes it (and builds nothing when no test did).
var binBuilt atomic.Bool

// buildCapmesh builds cmd/capmesh into a temporary directory, once per
// test binary.
var buildCapmesh = sync.OnceValues(func() (string, error) {
	binBuilt.Store(true)
	dir, err := os.MkdirTemp("", "capmesh-fleet-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "capmesh")
	build := exec.Command("go", "build", "-o", bin, "github.com/capmesh/capmesh/cmd/capmesh")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
})

// node is one `capmesh server` of the fleet. Its directories outlive its
// process, so that a node started again is the same node (same key,
// same socket).
type node struct {
	t      *testing.T
	name   string
	bin    string
	args   []string
	dir    string // XDG_STATE_HOME and the runtime directory live here
	sock   string
	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan error
	stderr *logbuf.Buffer
}

// newNode prepares node name with the shared registry and evidence URLs.
func newNode(t *testing.T, bin, name, registryURL, evidenceURL string) *node {
	dir := t.TempDir()
	n := &node{t: t, name: name, bin: bin, dir: dir, stderr: &logbuf.Buffer{},
		sock: filepath.Join(dir, "run", "biomeos", "capmesh.sock")}
	n.args = []string{"server", "--chp-fixtures", "--registry", registryURL, "--evidence", evidenceURL,
		"--drain-timeout", "5s"}
	return n
}

// start runs the node and waits until its socket answers.
func (n *node) start() {
	t := n.t
	t.Helper()
	run := filepath.Join(n.dir, "run")
	if err := os.MkdirAll(run, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(n.bin, n.args...)
	env := []string{"XDG_RUNTIME_DIR=" + run, "XDG_STATE_HOME=" + filepath.Join(n.dir, "state")}
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "FAMILY_ID", "NODE_ID", "XDG_RUNTIME_DIR", "XDG_STATE_HOME", "BIOMEOS_SOCKET_DIR", "DISCOVERY_SOCKET":
		default:
			env = append(env, kv)
		}
	}
	cmd.Env = env
	fmt.Fprintf(n.stderr, "--- start %s\n", time.Now().Format(time.TimeOnly))
	cmd.Stderr = n.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var alive map[string]any
		if err := n.call(context.Background(), "health.liveness", nil, &alive); err == nil {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("%s exited at start: %v\n%s", n.name, err, n.stderr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not answering after 60 s\n%s", n.name, n.stderr)
		}
	}
}

// kill9 kills the node with SIGKILL: no drain, no lease revoked.
func (n *node) kill9() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	fmt.Fprintf(n.stderr, "--- killed %s\n", time.Now().Format(time.TimeOnly))
}

// stop interrupts the node and checks that it exits after its drain.
func (n *node) stop() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil || cmd.ProcessState != nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		err = <-done
		n.t.Errorf("%s did not stop within 30 s of SIGINT", n.name)
	}
	var ee *exec.ExitError
	if err != nil && (!errors.As(err, &ee) || ee.ExitCode() != 130) {
		n.t.Errorf("%s exit: %v\n%s", n.name, err, n.stderr)
	}
}

// call makes one JSON-RPC call on the node's socket.
func (n *node) call(ctx context.Context, method string, params, out any) error {
	return call(ctx, n.sock, method, params, out)
}

// call makes one JSON-RPC call on a fresh connection to a Unix socket.
func call(ctx context.Context, sock, method string, params, out any) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
	}
	c, err := jsonrpc.Dial(ctx, "unix", sock, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Call(ctx, method, params, out)
}

// resolves reports whether the node resolves host name's capability
// <name>.echo (a lookup in its index, what its router does) to that host.
// By capability, not by name: ipc.resolve by name finds only the node's
// own local registrations and signed descriptors, not another node's
// local registration.
func (n *node) resolves(ctx context.Context, name string) bool {
	var out struct {
		PrimalID string `json:"primal_id"`
	}
	err := n.call(ctx, "ipc.resolve", map[string]string{"capability": name + ".echo"}, &out)
	return err == nil && out.PrimalID == name
}

// waitVisible waits until every node resolves name and returns how long
// after since each did; it fails t past the deadline.
func waitVisible(t *testing.T, nodes []*node, name string, since time.Time, within time.Duration) []time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	out := make([]time.Duration, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			for !n.resolves(ctx, name) {
				select {
				case <-ctx.Done():
					var l any
					_ = n.call(context.Background(), "ipc.list", map[string]bool{"include_untrusted": true}, &l)
					t.Errorf("%s not visible on %s within %v; ipc.list there: %v", name, n.name, within, l)
					return
				case <-time.After(2 * time.Millisecond):
				}
			}
			out[i] = time.Since(since)
		})
	}
	wg.Wait()
	return out
}
