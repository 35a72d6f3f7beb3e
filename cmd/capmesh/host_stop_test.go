package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestStoppedHostLeavesRegistry: a host that stops gracefully — Ctrl-C
// (SIGINT) or health.drain — unregisters, so `capmesh registry find` stops
// listing it at once, not when its registration's TTL (here 10 minutes)
// ends. Before, a stopped host stayed "live, trusted" for up to 90 s and a
// routed call failed with -32011.
func TestStoppedHostLeavesRegistry(t *testing.T) {
	if _, err := exec.LookPath("capmesh"); err != nil {
		t.Skip("capmesh is not on PATH (TestMain sets it up)")
	}
	dir := t.TempDir()
	env := append(os.Environ(), "XDG_RUNTIME_DIR="+dir+"/run", "XDG_STATE_HOME="+dir+"/state",
		"FAMILY_ID=", "NODE_ID=", "DISCOVERY_SOCKET=", "BIOMEOS_SOCKET_DIR=")
	if err := os.MkdirAll(dir+"/run", 0o700); err != nil {
		t.Fatal(err)
	}
	start := func(name string, args ...string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = env
		var logs bytes.Buffer
		cmd.Stderr = &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
			if t.Failed() {
				t.Logf("%s stderr:\n%s", name, logs.String())
			}
		})
		return cmd
	}
	// listed polls `capmesh registry find kv.get --json` until the node's
	// answer lists kvhost (want) or lists nothing (!want), for up to 30 s,
	// and returns how long that took. The answer is read, not the exit
	// status: a node that does not answer is neither.
	listed := func(want bool) time.Duration {
		t.Helper()
		t0 := time.Now()
		for time.Since(t0) < 30*time.Second {
			cmd := exec.Command("capmesh", "registry", "find", "kv.get", "--json")
			cmd.Env = env
			out, _ := cmd.Output()
			var res struct {
				Providers *[]struct {
					PrimalID string `json:"primal_id"`
				} `json:"providers"`
			}
			if json.Unmarshal(out, &res) == nil && res.Providers != nil {
				ps := *res.Providers
				if got := len(ps) == 1 && ps[0].PrimalID == "kvhost"; got == want && (want || len(ps) == 0) {
					return time.Since(t0)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("kvhost listed=%v not reached within 30 s (registration TTL 10 min)", want)
		return 0
	}

	start("capmesh", "server", "--memory", "--local-ttl", "10m")
	kv := start("kvhost", "-memory")
	listed(true)
	if err := kv.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	t.Logf("after SIGINT, unlisted in %s", listed(false))

	start("kvhost", "-memory")
	listed(true)
	drain := exec.Command("capmesh", "call", "--socket", filepath.Join(dir, "run", "biomeos", "kvhost.sock"), "health.drain", `{"timeout_ms":1000}`)
	drain.Env = env
	if out, err := drain.CombinedOutput(); err != nil {
		t.Fatalf("health.drain: %v\n%s", err, out)
	}
	t.Logf("after health.drain, unlisted in %s", listed(false))
}
