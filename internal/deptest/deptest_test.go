package deptest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// pkg is what `go list -deps -json` says of one package.
type pkg struct {
	ImportPath string
	Standard   bool
	Imports    []string
	Deps       []string
	Module     *struct {
		Path string
		Main bool
	}
}

// graph is the module's import graph: every package of the module and every
// package they depend on, tests excluded.
type graph struct {
	module string
	pkgs   map[string]*pkg
	own    []string // the module's packages, sorted
}

var loadGraph = sync.OnceValues(func() (*graph, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Standard,Imports,Deps,Module", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v\n%s", err, stderr.Bytes())
	}
	g := &graph{pkgs: map[string]*pkg{}}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(pkg)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		g.pkgs[p.ImportPath] = p
		if p.Module != nil && p.Module.Main {
			g.module = p.Module.Path
			g.own = append(g.own, p.ImportPath)
		}
	}
	if g.module == "" {
		return nil, errors.New("go list listed no package of the main module")
	}
	slices.Sort(g.own)
	return g, nil
})

// moduleRoot is the directory of the go.mod above the test's.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the test directory")
		}
		dir = parent
	}
}

func load(t *testing.T) *graph {
	t.Helper()
	g, err := loadGraph()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// rel is path below the module path ("" when path is not the module's).
func (g *graph) rel(path string) (string, bool) {
	return strings.CutPrefix(path, g.module+"/")
}

// chain returns an import chain from "from" to "to" (both import paths),
// module-relative where it can, for a failure message.
func (g *graph) chain(from, to string) string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == to {
			break
		}
		if g.pkgs[p] == nil {
			continue
		}
		for _, i := range g.pkgs[p].Imports {
			if _, seen := prev[i]; !seen {
				prev[i] = p
				queue = append(queue, i)
			}
		}
	}
	if _, ok := prev[to]; !ok {
		return to
	}
	var steps []string
	for p := to; p != ""; p = prev[p] {
		step := p
		if r, ok := g.rel(p); ok {
			step = r
		}
		steps = append(steps, step)
	}
	slices.Reverse(steps)
	return strings.Join(steps, " → ")
}

// TestEveryPackageHasALayer: a package added without a row in the layers
// table fails here, before it can import anything.
func TestEveryPackageHasALayer(t *testing.T) {
	g := load(t)
	for _, p := range g.own {
		r, _ := g.rel(p)
		if _, ok := layers[r]; !ok {
			t.Errorf("package %s has no layer. Add it to the layers table in internal/deptest/layers_test.go "+
				"at the row of DESIGN.md's layout it belongs to (foundation, mechanism, service, node, program): "+
				"the table is how the tree keeps its arrows pointing down, and a package without a row could import anything.", r)
		}
	}
}

// TestArrowsPointDown: no package imports a package of a higher layer.
func TestArrowsPointDown(t *testing.T) {
	g := load(t)
	for _, p := range g.own {
		r, _ := g.rel(p)
		from, ok := layers[r]
		if !ok {
			continue // TestEveryPackageHasALayer reports it
		}
		for _, imp := range g.pkgs[p].Imports {
			ri, own := g.rel(imp)
			to, known := layers[ri]
			if !own || !known || to <= from {
				continue
			}
			t.Errorf("%s (%s) imports %s (%s): arrows point down only (DESIGN.md, Layout). "+
				"Move what both need down a layer, or let the lower package declare an interface the higher one implements.",
				r, from, ri, to)
		}
	}
}

// forbidden reports, for each kind of dependency of pkg (module-relative)
// that match rejects, how many packages of that kind pkg depends on and the
// shortest import chain to one of them.
func (g *graph) forbidden(t *testing.T, pkgRel string, match func(dep string) (what string, bad bool)) []string {
	t.Helper()
	path := g.module + "/" + pkgRel
	p := g.pkgs[path]
	if p == nil {
		t.Fatalf("package %s is not in the module", pkgRel)
	}
	type found struct {
		chain string
		n     int
	}
	byWhat := map[string]*found{}
	for _, d := range p.Deps {
		what, bad := match(d)
		if !bad {
			continue
		}
		f := byWhat[what]
		if f == nil {
			f = &found{}
			byWhat[what] = f
		}
		f.n++
		if c := g.chain(path, d); f.chain == "" || strings.Count(c, "→") < strings.Count(f.chain, "→") {
			f.chain = c
		}
	}
	var out []string
	for what, f := range byWhat {
		out = append(out, fmt.Sprintf("%s (%d package(s), e.g. %s)", what, f.n, f.chain))
	}
	slices.Sort(out)
	return out
}

// TestSlimFoundations: the packages every consumer links carry no heavy
// dependency.
func TestSlimFoundations(t *testing.T) {
	g := load(t)
	for _, s := range slim {
		bad := g.forbidden(t, s, func(dep string) (string, bool) {
			for _, h := range heavy {
				if strings.HasPrefix(dep, h.prefix) {
					return h.what, true
				}
			}
			if strings.Contains(strings.ToLower(dep), "sqlite") {
				return "a SQLite", true
			}
			return "", false
		})
		for _, b := range bad {
			t.Errorf("%s depends on %s: it must stay light for everything that links it (DESIGN.md); "+
				"put the code that needs it in a package of the mechanism layer", s, b)
		}
	}
}

// TestVerifierIsPure: chp and chp/witnessing — what a bundle or witness
// verifier links — depend on nothing beyond the standard library,
// canonical, identity and crypto (and chp/witnessing on chp).
func TestVerifierIsPure(t *testing.T) {
	g := load(t)
	for _, v := range verifier {
		bad := g.forbidden(t, v, func(dep string) (string, bool) {
			if p := g.pkgs[dep]; p != nil && p.Standard {
				return "", false
			}
			r, own := g.rel(dep)
			for _, a := range append(chpAllowed, verifier...) {
				if (own && r == a) || (!own && (dep == a || strings.HasPrefix(dep, a+"/"))) {
					return "", false
				}
			}
			if p := g.pkgs[dep]; p != nil && p.Module != nil {
				return "module " + p.Module.Path, true
			}
			return dep, true
		})
		for _, b := range bad {
			t.Errorf("%s depends on %s: the protocol packages must verify evidence with the standard library, "+
				"canonical, identity and crypto only; move the code that needs more to chp/boundary or chp/schema", v, b)
		}
	}
}

// TestHostStaysALibrary: writing a capability host does not link a node's
// distributed backends, its dashboard or the telemetry SDKs.
func TestHostStaysALibrary(t *testing.T) {
	g := load(t)
	bad := g.forbidden(t, "host", func(dep string) (string, bool) {
		for _, f := range hostForbidden {
			prefix := strings.Replace(f.prefix, "$module", g.module, 1)
			if dep == prefix || strings.HasPrefix(dep, strings.TrimSuffix(prefix, "/")+"/") {
				return f.what, true
			}
		}
		return "", false
	})
	for _, b := range bad {
		t.Errorf("host depends on %s: the host library must not pull in a node's backends, dashboard or telemetry SDKs (DESIGN.md); "+
			"let the node or the program opt into them", b)
	}
}

// TestPlainHostLinksNoOTel: the packages of a plain host do not link
// OpenTelemetry (SDK, exporters, API) or gRPC; tracing reaches them
// through package tracing's hook, implemented in telemetry.
func TestPlainHostLinksNoOTel(t *testing.T) {
	g := load(t)
	for _, p := range plainHost {
		bad := g.forbidden(t, p, func(dep string) (string, bool) {
			for _, f := range otelForbidden {
				if strings.HasPrefix(dep, f.prefix) {
					return f.what, true
				}
			}
			return "", false
		})
		for _, b := range bad {
			t.Errorf("%s depends on %s: a plain host must not link OpenTelemetry (DESIGN.md); "+
				"declare what it needs in package tracing and implement it in telemetry, which a program opts into", p, b)
		}
	}
}
