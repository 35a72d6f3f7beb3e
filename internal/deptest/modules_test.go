package deptest

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// modFile is what `go mod edit -json` says of a go.mod.
type modFile struct {
	Module  struct{ Path string }
	Require []struct{ Path string }
	Replace []struct {
		Old struct{ Path string }
		New struct{ Path string }
	}
	Tool []struct{ Path string }
}

func readModFile(t *testing.T, dir string) modFile {
	t.Helper()
	out, err := exec.Command("go", "mod", "edit", "-json", filepath.Join(dir, "go.mod")).Output()
	if err != nil {
		t.Fatalf("go mod edit -json %s: %v", dir, err)
	}
	var m modFile
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestBenchAndToolModulesStayOut: the peer libraries the benchmarks measure
// against and the pinned development tools live in modules of their own
// (internal/bench, internal/tools), so neither reaches the module graph of
// a library user of capmesh through the root go.mod.
func TestBenchAndToolModulesStayOut(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	main := readModFile(t, root)
	outside := []string{"github.com/creachadair/jrpc2", "github.com/sourcegraph/jsonrpc2", "honnef.co/go/tools"}
	for _, r := range main.Require {
		for _, o := range outside {
			if strings.HasPrefix(r.Path, o) {
				t.Errorf("the root go.mod requires %s, which belongs in internal/bench or internal/tools", r.Path)
			}
		}
	}
	if len(main.Tool) != 0 {
		t.Errorf("the root go.mod has tool directives %v; tools are pinned in internal/tools", main.Tool)
	}
	for _, sub := range []string{"internal/bench", "internal/tools"} {
		m := readModFile(t, filepath.Join(root, sub))
		if want := main.Module.Path + "/" + sub; m.Module.Path != want {
			t.Errorf("%s/go.mod declares module %q, want %q", sub, m.Module.Path, want)
		}
	}
	bench := readModFile(t, filepath.Join(root, "internal/bench"))
	replaced := false
	for _, r := range bench.Replace {
		replaced = replaced || (r.Old.Path == main.Module.Path && r.New.Path == "../..")
	}
	if !replaced {
		t.Errorf("internal/bench/go.mod does not replace %s by ../.., so it would benchmark a published version", main.Module.Path)
	}
	tools := readModFile(t, filepath.Join(root, "internal/tools"))
	if len(tools.Tool) == 0 || tools.Tool[0].Path != "honnef.co/go/tools/cmd/staticcheck" {
		t.Errorf("internal/tools/go.mod pins tools %v, want staticcheck", tools.Tool)
	}
}
