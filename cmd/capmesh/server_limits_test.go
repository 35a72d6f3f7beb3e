package main

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestServerHTTPRateLimitFlag: --http-rate-limit reaches the node's HTTP
// surface: with agents=2, the third POST /agents from one client is 429
// with Retry-After.
func TestServerHTTPRateLimitFlag(t *testing.T) {
	if _, err := exec.LookPath("capmesh"); err != nil {
		t.Skip("capmesh is not on PATH (TestMain sets it up)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	cmd := exec.Command("capmesh", "server", "--memory", "--http", addr, "--http-rate-limit", "agents=2")
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+dir, "XDG_STATE_HOME="+dir+"/state", "FAMILY_ID=", "NODE_ID=")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	c := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node did not serve HTTP within 30 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var codes []int
	for i := 0; i < 3; i++ {
		resp, err := c.Post("http://"+addr+"/agents", "application/json", strings.NewReader("{"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
		if i == 2 {
			// 2 a minute: the next token is at most 30 s away.
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 || s > 30 {
				t.Errorf("Retry-After %q, want 1-30 seconds", resp.Header.Get("Retry-After"))
			}
		}
	}
	if codes[0] != 400 || codes[1] != 400 || codes[2] != http.StatusTooManyRequests {
		t.Fatalf("statuses %v, want [400 400 429]", codes)
	}
}
