// Package pgtest gives the tests of a test binary a real PostgreSQL server:
// the one the environment variable CAPMESH_TEST_POSTGRES names (a DSN), or
// else a private cluster created with initdb in a temporary directory and
// served on a Unix socket there with pg_ctl — started when a test first
// asks for it, stopped and removed by Main when the tests are done. Run as
// root, the cluster runs as the postgres user (initdb refuses root).
//
// Each test gets its own schema (DSN, FreshDSN), so tests never see each
// other's tables. A test skips with the reason when no server could be
// started, unless CAPMESH_REQUIRE_POSTGRES=1 (CI), where it fails.
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvDSN names the server to use instead of starting one; Main sets it for
// the processes a test re-executes (the SIGKILL crash test).
const EnvDSN = "CAPMESH_TEST_POSTGRES"

// EnvRequire, set to 1, turns a server that cannot be started into a test
// failure instead of a skip.
const EnvRequire = "CAPMESH_REQUIRE_POSTGRES"

var (
	managed bool // Main runs: it stops a cluster started
	once    sync.Once
	running *cluster // the cluster this process started
	base    string   // the server's DSN, "" when none
	whyNone error    // why there is no server
)

// M is what Main runs: *testing.M, or what testscript.Main takes.
type M interface{ Run() int }

// Main runs m's tests, stops the cluster if a test started one, and
// returns the exit code: use it as os.Exit(pgtest.Main(m)) in TestMain.
func Main(m M) int {
	managed = true
	defer func() {
		if running != nil {
			running.stop()
		}
	}()
	return m.Run()
}

// Wrap is m run by Main, for a TestMain that hands m on (testscript.Main).
func Wrap(m M) M { return wrapped{m} }

type wrapped struct{ m M }

func (w wrapped) Run() int { return Main(w.m) }

// server finds or starts the server, once.
func server() {
	once.Do(func() {
		if dsn := os.Getenv(EnvDSN); dsn != "" {
			base = dsn
			return
		}
		if !managed {
			whyNone = errors.New("pgtest.Main did not run: call it from TestMain")
			return
		}
		c, err := start()
		if err != nil {
			whyNone = err
			return
		}
		running, base = c, c.dsn
		os.Setenv(EnvDSN, c.dsn) // re-executed children share the server
	})
}

// cluster is a private server this process started.
type cluster struct {
	dir, data, bin string
	opts           string     // the server's options
	owner          *user.User // nil: this user
	dsn            string
}

// binDir finds the newest installed PostgreSQL's programs.
func binDir() (string, error) {
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return va - vb
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	return "", errors.New("no PostgreSQL installation (initdb) found: install the postgresql package or set " + EnvDSN)
}

func start() (*cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "capmesh-pg-")
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir, data: filepath.Join(dir, "data"), bin: bin}
	if os.Geteuid() == 0 {
		if c.owner, err = user.Lookup("postgres"); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root and no postgres user to run the server as: %w", err)
		}
		uid, _ := strconv.Atoi(c.owner.Uid)
		gid, _ := strconv.Atoi(c.owner.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if out, err := c.run("initdb", "-D", c.data, "-U", "capmesh", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	// A Unix socket in the private directory only: no port to collide on.
	opts := "-c listen_addresses='' -c unix_socket_directories='" + dir + "' -c max_connections=200 -c fsync=on"
	c.opts = opts
	if err := c.start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c.dsn = "postgres://capmesh@/postgres?sslmode=disable&host=" + url.QueryEscape(dir)
	return c, nil
}

func (c *cluster) start() error {
	if out, err := c.run("pg_ctl", "start", "-w", "-t", "60", "-D", c.data, "-l", filepath.Join(c.dir, "server.log"), "-o", c.opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
		return fmt.Errorf("pg_ctl start: %w\n%s\n%s", err, out, log)
	}
	return nil
}

// CrashServer stops the private cluster the way a crash does (pg_ctl stop
// -m immediate: no checkpoint, every backend killed, crash recovery at the
// next start) and, once the tests' clients have seen it down, restart
// starts it again. It fails for a server this process did not start.
func CrashServer() (restart func() error, err error) {
	if running == nil {
		return nil, errors.New("pgtest: the server is not this process's")
	}
	if out, err := running.run("pg_ctl", "stop", "-w", "-m", "immediate", "-D", running.data); err != nil {
		return nil, fmt.Errorf("pg_ctl stop -m immediate: %w\n%s", err, out)
	}
	return running.start, nil
}

// run runs one of the server's programs as the cluster's owner.
func (c *cluster) run(prog string, args ...string) ([]byte, error) {
	path := filepath.Join(c.bin, prog)
	var cmd *exec.Cmd
	if c.owner != nil {
		cmd = exec.Command("runuser", append([]string{"-u", c.owner.Username, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = c.dir
	return cmd.CombinedOutput()
}

func (c *cluster) stop() {
	_, _ = c.run("pg_ctl", "stop", "-w", "-m", "fast", "-D", c.data)
	os.RemoveAll(c.dir)
}

// Available reports whether there is a server, starting it on first use,
// or why not.
func Available() error {
	server()
	return whyNone
}

// Require skips (or, under CAPMESH_REQUIRE_POSTGRES=1, fails) t without a
// server, starting it if need be. A test that re-executes the test binary
// (storetest.Crash) calls it before the first child starts, so that the
// children find the server in the environment instead of each starting
// its own.
func Require(t testing.TB) { t.Helper(); need(t) }

// need is Require.
func need(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("PostgreSQL required (%s=1) but not available: %v", EnvRequire, err)
		}
		t.Skipf("PostgreSQL not available, skipping: %v", err)
	}
}

// DSN returns a DSN whose search_path is a schema named after name,
// created if missing: the same name gives the same schema, so a store
// reopened with it sees what it held (the durable tests name it after
// their directory).
func DSN(t testing.TB, name string) string {
	t.Helper()
	need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn, err := SchemaDSN(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// FreshDSN is DSN for a new, empty schema that is dropped when t ends.
func FreshDSN(t testing.TB) string {
	t.Helper()
	need(t)
	name := t.Name() + "/" + rand.Text()
	dsn := DSN(t, name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := Exec(ctx, "DROP SCHEMA "+Schema(name)+" CASCADE"); err != nil {
			t.Errorf("dropping the test schema: %v", err)
		}
	})
	return dsn
}

// Schema is the schema name DSN uses for name.
func Schema(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "t_" + hex.EncodeToString(sum[:10])
}

// SchemaDSN is DSN for code without a testing.TB (a re-executed child).
func SchemaDSN(ctx context.Context, name string) (string, error) {
	if err := Available(); err != nil {
		return "", err
	}
	if err := Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+Schema(name)); err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	return Param(base, "search_path", Schema(name)), nil
}

// Param adds the run-time parameter key=value to dsn, a URL
// (postgres://…) or a key=value string.
func Param(dsn, key, value string) string {
	if !strings.Contains(dsn, "://") {
		return dsn + " " + key + "=" + value
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + url.QueryEscape(key) + "=" + url.QueryEscape(value)
}

// Exec runs sql on the test server as its superuser.
func Exec(ctx context.Context, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// ServerCPU is the CPU time (user and system) the private cluster's
// processes have used so far, for benchmarks that count the server's
// share of an operation. It fails for a server this process did not start.
func ServerCPU() (time.Duration, error) {
	if running == nil {
		return 0, errors.New("pgtest: the server is not this process's")
	}
	b, err := os.ReadFile(filepath.Join(running.data, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	pm, _, _ := strings.Cut(string(b), "\n")
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var ticks int64
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid … utime(14) stime(15) cutime(16) cstime(17)
		i := strings.LastIndexByte(string(st), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(st[i+1:]))
		if len(f) < 15 {
			continue
		}
		n := func(k int) int64 { v, _ := strconv.ParseInt(f[k-3], 10, 64); return v }
		switch {
		case e.Name() == pm:
			ticks += n(14) + n(15) + n(16) + n(17) // with the backends that exited
		case f[1] == pm:
			ticks += n(14) + n(15)
		}
	}
	return time.Duration(ticks) * time.Second / 100, nil // USER_HZ
}
