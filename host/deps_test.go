package host_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps the host library light: a provider built with it
// must not pull in SQLite, etcd, PostgreSQL, the dashboard, telemetry SDKs,
// the registry node or the CLI (../shared/DESIGN.md). Those are injected by
// the programs that want them (cmd/capmesh mounts the registry node).
func TestDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/capmesh/capmesh/host").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	forbidden := []string{
		"modernc.org/sqlite", "github.com/mattn/go-sqlite3", "go.etcd.io/", "github.com/jackc/pgx", "github.com/lib/pq",
		"go.opentelemetry.io/", "github.com/prometheus/",
		"github.com/capmesh/capmesh/dashboard", "github.com/capmesh/capmesh/registry/sqlite",
		"github.com/capmesh/capmesh/registry/etcd", "github.com/capmesh/capmesh/evidence/postgres",
		"github.com/capmesh/capmesh/cmd/", "github.com/spf13/cobra",
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("host depends on %s", dep)
			}
		}
		if dep == "github.com/capmesh/capmesh/registry" {
			t.Errorf("host depends on the registry node package")
		}
	}
}
