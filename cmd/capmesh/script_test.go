package main

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/capmesh/capmesh/examples/kvhost/kv"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"capmesh": func() { os.Exit(runMain()) },
		"kvhost":  func() { os.Exit(kv.Main()) },
	})
}

// TestScripts runs the CLI transcripts in testdata/script: each .txtar file
// is a shell-like script run against the real capmesh binary entry point.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			// Keep every test's sockets and state inside its own work dir.
			env.Setenv("XDG_RUNTIME_DIR", env.WorkDir+"/run")
			env.Setenv("XDG_STATE_HOME", env.WorkDir+"/state")
			return os.MkdirAll(env.WorkDir+"/run", 0o700)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": cmdExitcode,
			"waitfor":  cmdWaitfor,
			"freeport": cmdFreeport,
		},
	})
}

// cmdExitcode runs `exitcode N prog args...` and fails unless prog exits with
// status N. Its stdout and stderr are kept for later stdout/stderr checks.
func cmdExitcode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exitcode N prog [args...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("exitcode: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// cmdWaitfor waits (up to 20 s) until a path exists or, for a
// "tcp:HOST:PORT" argument, until the port accepts connections. Scripts use
// it to wait for a background server.
func cmdWaitfor(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitfor PATH|tcp:HOST:PORT")
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if addr, ok := strings.CutPrefix(args[0], "tcp:"); ok {
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				return
			}
		} else if _, err := os.Stat(ts.MkAbs(args[0])); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	ts.Fatalf("%s did not appear within 20s", args[0])
}

// cmdFreeport sets the environment variable named by its argument to a TCP
// port that is free on 127.0.0.1.
func cmdFreeport(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: freeport VAR")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	port := l.Addr().(*net.TCPAddr).Port
	ts.Check(l.Close())
	ts.Setenv(args[0], strconv.Itoa(port))
}
