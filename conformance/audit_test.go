package conformance_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"

	"github.com/capmesh/capmesh/conformance"
	"github.com/capmesh/capmesh/conformance/fakehost"
	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/internal/specdata"
)

var updateWants = flag.Bool("update-wants", false, "rewrite the want-* headers of testdata/hosts from what the audit finds")

// specDir is the specification test data copied into the repository.
func specDir() string { return specdata.Dir() }

// biomeos makes a private XDG_RUNTIME_DIR with its biomeos directory.
func biomeos(t testing.TB) string {
	t.Helper()
	run := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", run)
	t.Setenv("BIOMEOS_SOCKET_DIR", "")
	dir := filepath.Join(run, "biomeos")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// serve starts spec on a Unix socket in dir and stops it at cleanup.
func serve(t testing.TB, dir string, spec *fakehost.Spec) endpoint.Address {
	t.Helper()
	name := spec.Socket
	if name == "" {
		name = "host.sock"
	}
	l, err := endpoint.ListenUnix(filepath.Join(dir, name), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fakehost.Serve(ctx, l, spec) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("fake host did not stop")
		}
	})
	return endpoint.Address{Scheme: "unix", Path: l.Path()}
}

func loadSpec(t *testing.T, file string) *fakehost.Spec {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s, err := fakehost.ParseSpec(strings.TrimSuffix(filepath.Base(file), ".txtar"), data, specDir())
	if errors.Is(err, fakehost.ErrNoSpecData) {
		t.Skipf("shared spec data not found (set CAPMESH_SPEC_DIR): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func failedIDs(r *conformance.HostReport) []string {
	var out []string
	for _, c := range r.Failed() {
		out = append(out, c.ID)
	}
	return out
}

func chpVerdict(r *conformance.HostReport) string {
	switch {
	case r.CHP == nil:
		return "none"
	case r.CHP.OK():
		return "ok"
	}
	var ids []string
	for _, c := range r.Suite(conformance.SuiteCHP) {
		if c.Status == conformance.Fail {
			ids = append(ids, c.ID)
		}
	}
	return strings.Join(ids, " ")
}

// TestHostSpecs audits every host in testdata/hosts — the recorded real
// primals, every capability-format example, our own conformant host and
// the deliberately broken ones — over a real Unix socket, and compares
// level, failed checks and CHP verdict with the spec's want-* headers.
func TestHostSpecs(t *testing.T) {
	files, err := filepath.Glob("testdata/hosts/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatal("no host specs", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			spec := loadSpec(t, file)
			dir := biomeos(t)
			addr := serve(t, dir, spec)
			rep := conformance.Audit(context.Background(), addr, &conformance.Options{ProbeTimeout: 2 * time.Second})
			got := fakehost.Want{Level: rep.Level, Verified: rep.Verified, Fail: failedIDs(rep), CHP: chpVerdict(rep)}
			if *updateWants {
				rewriteWants(t, file, got)
				return
			}
			if !rep.Reachable {
				t.Fatalf("unreachable: %s", rep.Error)
			}
			if diff := cmp.Diff(spec.Want, got); diff != "" {
				var sb strings.Builder
				conformance.WriteReport(&sb, rep)
				t.Errorf("audit differs from the spec's wants (-want +got):\n%s\n%s", diff, sb.String())
			}
			// A recorded response: the live audit reproduces the static
			// level of the same bytes (all live requirements holding).
			recorded := strings.HasPrefix(spec.Name, "real-") || strings.HasPrefix(spec.Name, "fmt-")
			if raw, ok := spec.Answers["capabilities.list"]; ok && recorded {
				var resp struct{ Result json.RawMessage }
				if json.Unmarshal(raw, &resp) == nil && resp.Result != nil && spec.Behaviour == "" {
					static, err := conformance.Level(resp.Result)
					if err == nil && static.Level != rep.Level {
						t.Errorf("live level %d, static level of the same capabilities.list %d", rep.Level, static.Level)
					}
				}
			}
			for _, c := range rep.Checks {
				if c.Status != conformance.Pass && c.Status != conformance.Skip && c.Reason == "" {
					t.Errorf("%s is %s without a reason", c.ID, c.Status)
				}
				if c.Source == "" {
					t.Errorf("%s has no source", c.ID)
				}
			}
		})
	}
}

func rewriteWants(t *testing.T, file string, w fakehost.Want) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ar := txtar.Parse(data)
	var keep []string
	for _, l := range strings.Split(strings.TrimRight(string(ar.Comment), "\n"), "\n") {
		if !strings.HasPrefix(l, "want-") {
			keep = append(keep, l)
		}
	}
	keep = append(keep, "want-level: "+itoa(w.Level), "want-verified: "+itoa(w.Verified))
	if len(w.Fail) > 0 {
		keep = append(keep, "want-fail: "+strings.Join(w.Fail, " "))
	}
	keep = append(keep, "want-chp: "+w.CHP)
	ar.Comment = []byte(strings.Join(keep, "\n") + "\n")
	if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
