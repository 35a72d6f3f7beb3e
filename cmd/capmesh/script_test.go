package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/capmesh/capmesh/evidence/postgres/pgtest"
	"github.com/capmesh/capmesh/examples/kvhost/kv"
	"github.com/capmesh/capmesh/internal/etcdtest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(accessMatrixChild()) // the access matrix's other-uid caller
	}
	testscript.Main(pgtest.Wrap(m), map[string]func(){
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
			if err := os.MkdirAll(env.WorkDir+"/run", 0o700); err != nil {
				return err
			}
			// The files the README's tour names, at the README's paths.
			for _, dir := range tourDirs {
				if err := copyDir(filepath.Join("..", "..", dir), filepath.Join(env.WorkDir, dir)); err != nil {
					return err
				}
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": cmdExitcode,
			"waitfor":  cmdWaitfor,
			"freeport": cmdFreeport,
			"waitconn": cmdWaitconn,
			"waitexec": cmdWaitexec,

			"evidencelog": cmdEvidenceLog, // evidence_check_test.go
			"jsonflip":    cmdJSONFlip,    // evidence_witness_test.go

			"pgurl":   cmdPgurl,
			"etcdurl": cmdEtcdurl,
		},
		Condition: func(cond string) (bool, error) {
			if cond == "etcd" {
				_, err := etcdtest.Binary()
				if err != nil && os.Getenv(etcdtest.EnvRequire) == "1" {
					return false, fmt.Errorf("etcd required (%s=1): %w", etcdtest.EnvRequire, err)
				}
				return err == nil, nil
			}
			if cond != "postgres" {
				return false, fmt.Errorf("unknown condition %q", cond)
			}
			err := pgtest.Available()
			if err != nil && os.Getenv(pgtest.EnvRequire) == "1" {
				return false, fmt.Errorf("PostgreSQL required (%s=1): %w", pgtest.EnvRequire, err)
			}
			return err == nil, nil
		},
	})
}

// cmdPgurl runs `pgurl NAME`: NAME is set to the URL of a fresh schema on
// the test PostgreSQL server (guard the script with [postgres]).
func cmdPgurl(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: pgurl NAME")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url, err := pgtest.SchemaDSN(ctx, ts.Getenv("WORK"))
	ts.Check(err)
	ts.Setenv(args[0], url)
}

// cmdEtcdurl runs `etcdurl NAME`: NAME is set to the URL (etcd://host:port)
// of a private etcd server that the script's end stops (guard the script
// with [etcd]).
func cmdEtcdurl(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: etcdurl NAME")
	}
	ts.Setenv(args[0], etcdtest.Start(scriptTB{ts: ts}).URL())
}

// scriptTB is the part of testing.TB that etcdtest.Start uses, on a
// script: its cleanups run when the script ends and a failure fails it.
// The embedded TB is nil; any other method would panic.
type scriptTB struct {
	testing.TB
	ts *testscript.TestScript
}

func (s scriptTB) Helper()                        {}
func (s scriptTB) Cleanup(f func())               { s.ts.Defer(f) }
func (s scriptTB) Fatalf(format string, a ...any) { s.ts.Fatalf(format, a...) }
func (s scriptTB) Skipf(format string, a ...any)  { s.ts.Fatalf("etcd: "+format, a...) }

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

// tourDirs are the repository directories whose files the README's tour
// names; Setup copies them (not their subdirectories) into every script's
// work directory.
var tourDirs = []string{"examples/tour", "compose/testdata"}

// copyDir copies the regular files of src (not its subdirectories) to dst.
func copyDir(src, dst string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// cmdWaitexec runs `waitexec DURATION prog args...` until prog exits 0,
// for at most DURATION: scripts use it to wait for a state a background
// process reaches on its own (a host registered with the node).
func cmdWaitexec(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: waitexec DURATION prog [args...]")
	}
	d, err := time.ParseDuration(args[0])
	ts.Check(err)
	deadline := time.Now().Add(d)
	for {
		err := ts.Exec(args[1], args[2:]...)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s did not succeed within %s: %v", args[1], d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cmdWaitfor waits (up to 60 s) until a path exists or, for a
// "tcp:HOST:PORT" argument, until the port accepts connections. Scripts use
// it to wait for a background server.
func cmdWaitfor(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitfor PATH|tcp:HOST:PORT")
	}
	deadline := time.Now().Add(60 * time.Second)
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
	ts.Fatalf("%s did not appear within 60s", args[0])
}

// cmdWaitconn waits (up to 60 s) until the Unix socket at PATH has at least
// N accepted connections, read from /proc/net/unix. Scripts use it to know
// that a background client has connected before they disturb its server,
// rather than sleeping and hoping the client was scheduled in time.
func cmdWaitconn(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitconn PATH N")
	}
	path := ts.MkAbs(args[0])
	want, err := strconv.Atoi(args[1])
	ts.Check(err)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if unixConnections(ts, path) >= want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	ts.Fatalf("%s did not reach %d connections within 60s", path, want)
}

// unixConnections counts the connected (state 03) sockets bound to path in
// /proc/net/unix: the server side of every accepted connection.
func unixConnections(ts *testscript.TestScript, path string) int {
	data, err := os.ReadFile("/proc/net/unix")
	ts.Check(err)
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		// Num RefCount Protocol Flags Type St Inode Path
		f := strings.Fields(line)
		if len(f) == 8 && f[5] == "03" && f[7] == path {
			n++
		}
	}
	return n
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
