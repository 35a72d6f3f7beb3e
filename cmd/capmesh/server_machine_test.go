package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/jsonrpc"
)

// TestServerMachineIDFlag: --machine-id is the machine a node of a shared
// registry stamps its local registrations with, it wins over
// CAPMESH_MACHINE_ID, and it names the same machine as that variable
// does. Node a (--machine-id m1, CAPMESH_MACHINE_ID=m2) and node c
// (CAPMESH_MACHINE_ID=m1) are one machine, node b (--machine-id m2,
// CAPMESH_MACHINE_ID=m1) another: a host registered on a's Unix socket is
// routed by c, while b lists it as not dialable and refuses a call to it
// with endpoint_is_local. Were the variable to win, c and b would swap
// answers; were the flag's name not derived as the variable's, c would
// refuse too.
func TestServerMachineIDFlag(t *testing.T) {
	if _, err := exec.LookPath("capmesh"); err != nil {
		t.Skip("capmesh is not on PATH (TestMain sets it up)")
	}
	srv := etcdtest.Start(t)
	dir, err := os.MkdirTemp("", "cm-mid-") // short: Unix socket paths
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := srv.URL() + "/machineid"
	a := startFleetNode(ctx, t, dir, "a", "m2", "--registry", url, "--machine-id", "m1")
	b := startFleetNode(ctx, t, dir, "b", "m1", "--registry", url, "--machine-id", "m2")
	c := startFleetNode(ctx, t, dir, "c", "m1", "--registry", url)
	startTarget(t, dir, "probe", a, false)

	dialable := map[string]bool{}
	for name, sock := range map[string]string{"b": b, "c": c} {
		dialable[name] = listedDialable(ctx, t, sock, "probe.echo")
	}
	if !dialable["c"] || dialable["b"] {
		t.Errorf("probe, registered on a (m1), dialable on b (m2): %v, on c (m1): %v; want false, true", dialable["b"], dialable["c"])
	}
	var got string
	if err := call(ctx, c, "probe.echo", map[string]string{"value": "hi"}, &got); err != nil || got != "hi" {
		t.Errorf("probe.echo through c (m1): %q, %v", got, err)
	}
	err = call(ctx, b, "probe.echo", map[string]string{"value": "hi"}, nil)
	var je *jsonrpc.Error
	var data struct {
		Code string `json:"code"`
	}
	if !errors.As(err, &je) || json.Unmarshal(je.Data, &data) != nil || data.Code != "endpoint_is_local" {
		t.Errorf("probe.echo through b (m2): %v, want endpoint_is_local", err)
	}
}

// startFleetNode runs `capmesh server --memory` as a process named name,
// with its socket in dir, CAPMESH_MACHINE_ID=envMachine and args, until
// the test ends; it returns the socket once the node answers on it.
func startFleetNode(ctx context.Context, t *testing.T, dir, name, envMachine string, args ...string) string {
	t.Helper()
	sock := filepath.Join(dir, name+".sock")
	cmd := exec.Command("capmesh", append([]string{"server", "--memory", "--name", "node-" + name, "--domain", "", "--socket", sock}, args...)...)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+dir, "XDG_STATE_HOME="+filepath.Join(dir, name),
		"FAMILY_ID=", "NODE_ID=", "DISCOVERY_SOCKET=", "BIOMEOS_SOCKET_DIR=", "CAPMESH_MACHINE_ID="+envMachine)
	var logs bytes.Buffer
	cmd.Stderr = &lockedWriter{w: &logs}
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
			t.Logf("node %s:\n%s", name, logs.String())
		}
	})
	for call(ctx, sock, "health.liveness", nil, nil) != nil {
		select {
		case <-exited:
			t.Fatalf("node %s exited before it answered:\n%s", name, logs.String())
		case <-ctx.Done():
			t.Fatalf("node %s not ready", name)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return sock
}

// listedDialable waits until the node at sock lists a provider of
// capability (ipc.list) and reports whether the node may dial it.
func listedDialable(ctx context.Context, t *testing.T, sock, capability string) bool {
	t.Helper()
	for {
		var list struct {
			Services []struct {
				Capabilities []string `json:"capabilities"`
				Dialable     *bool    `json:"dialable"`
			} `json:"services"`
		}
		if err := call(ctx, sock, "ipc.list", nil, &list); err != nil {
			t.Fatal(err)
		}
		for _, s := range list.Services {
			if slices.Contains(s.Capabilities, capability) {
				return s.Dialable == nil || *s.Dialable
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never listed %s", sock, capability)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// call makes one call on a fresh connection to the Unix socket sock.
func call(ctx context.Context, sock, method string, params, result any) error {
	c, err := jsonrpc.Dial(ctx, "unix", sock, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Call(ctx, method, params, result)
}
