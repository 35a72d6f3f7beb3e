package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/rogpeppe/go-internal/txtar"
)

// The dashboard in a real browser: Debian's chromium, headless, driven by
// chromedp, against the real capmesh binary (`capmesh server`, `capmesh
// dashboard`) and a real host (examples/kvhost). Without chromium the
// tests skip with a message; with CAPMESH_REQUIRE_BROWSER=1 (CI) they fail.
// CAPMESH_UPDATE_SCREENSHOTS=1 writes the screenshots to docs/img/, which
// the README shows.

const (
	envRequireBrowser    = "CAPMESH_REQUIRE_BROWSER"
	envUpdateScreenshots = "CAPMESH_UPDATE_SCREENSHOTS"
	browserKey           = "operator-browser-key"
	// enrolledKey is the node key of testdata/script/registry.txtar's
	// signed descriptor (planner-1, llm:chat).
	enrolledKey = "frFHgD2h7pTJ9c9dXqcWfOa5Lvx1u9afoo3EvneqeBA="
)

// chromium returns the browser to drive, or skips (fails when required).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on PATH: the dashboard's browser tests need Debian's chromium (apt-get install chromium)"
	if os.Getenv(envRequireBrowser) == "1" {
		t.Fatalf("%s, and %s=1 requires them", msg, envRequireBrowser)
	}
	t.Skip(msg)
	return ""
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// binaries builds capmesh and kvhost once per test binary, as a user
// would (CGO_ENABLED=0), into a directory removed when the tests end.
func binaries(t *testing.T) (capmesh, kvhost string) {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "capmesh-browser-bin-")
		if buildErr != nil {
			return
		}
		for _, b := range [][2]string{{"capmesh", "github.com/capmesh/capmesh/cmd/capmesh"}, {"kvhost", "github.com/capmesh/capmesh/examples/kvhost"}} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(buildDir, b[0]), b[1])
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", b[1], err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "capmesh"), filepath.Join(buildDir, "kvhost")
}

// proc is a running process of the test.
type proc struct {
	cmd    *exec.Cmd
	out    *lockedBuffer // server_root_test.go
	exited chan struct{}
}

// start runs bin with args and env until the test ends (SIGINT, then
// SIGKILL after 30 s).
func start(t *testing.T, env []string, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), out: &lockedBuffer{ch: make(chan struct{}, 1)}, exited: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
			t.Errorf("%s did not stop within 30 s of SIGINT", filepath.Base(bin))
		}
	})
	return p
}

// run runs bin once and returns its output, failing the test on an error.
func run(t *testing.T, env []string, stdin string, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// waitHTTP waits until url answers 200 (or p exits).
func waitHTTP(t *testing.T, p *proc, url string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := http.Get(url)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-p.exited:
			t.Fatalf("exited before %s answered:\n%s", url, p.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer within 60 s (%v):\n%s", url, err, p.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// browser starts headless chromium for the test and returns its context,
// bounded by timeout.
func browser(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	path := chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		// A loaded machine may take long to start chromium (default 20 s).
		chromedp.WSURLReadTimeout(2 * time.Minute),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	tctx, tcancel := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { tcancel(); cancel(); acancel() })
	// Start the browser now, on the context without a deadline (a
	// deadline on the first call would bound the browser's life), so that
	// a broken install fails here.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return tctx
}

// screenshot captures the whole page as PNG into docs/img/<name>.png when
// CAPMESH_UPDATE_SCREENSHOTS=1, else into the test's temporary directory.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("screenshot %s: not a PNG", name)
	}
	dir := t.TempDir()
	if os.Getenv(envUpdateScreenshots) == "1" {
		dir = filepath.Join("..", "..", "docs", "img")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// descriptorJSON is the signed descriptor of registry.txtar.
func descriptorJSON(t *testing.T) string {
	t.Helper()
	a, err := txtar.ParseFile(filepath.Join("testdata", "script", "registry.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range a.Files {
		if f.Name == "descriptor.json" {
			return string(f.Data)
		}
	}
	t.Fatal("registry.txtar has no descriptor.json")
	return ""
}

// meshEnv is a keyed node (capmesh server --http, CHP fixtures, an
// operator key) with a real host registered (kvhost), each in a private
// runtime and state directory.
type meshEnv struct {
	env     []string
	capmesh string
	base    string // the node's HTTP base URL
}

func startMesh(t *testing.T) *meshEnv {
	t.Helper()
	capmesh, kvhost := binaries(t)
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	if err := os.MkdirAll(run, 0o700); err != nil {
		t.Fatal(err)
	}
	m := &meshEnv{capmesh: capmesh, env: append(os.Environ(), "XDG_RUNTIME_DIR="+run, "XDG_STATE_HOME="+filepath.Join(dir, "state"),
		"FAMILY_ID=", "NODE_ID=", "FAMILY_SEED=", "CHP_HOST_API_KEYS=", "BIOMEOS_SOCKET_DIR=")}
	addr := freePort(t)
	m.base = "http://" + addr
	nodeEnv := append(append([]string{}, m.env...), "CHP_HOST_API_KEY="+browserKey)
	srv := start(t, nodeEnv, capmesh, "server", "--memory", "--chp-fixtures", "--http", addr, "--local-ttl", "1h")
	waitHTTP(t, srv, m.base+"/health")
	m.env = append(m.env, "CHP_HOST_API_KEY=")
	start(t, m.env, kvhost, "-memory")
	return m
}

// css is a CSS selector.
func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// text returns the text of the first element sel matches, once visible.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(css(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// do runs steps, failing the test with what on an error.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestBrowserDashboard drives the node's own /ui: the registry page lists
// the real host and follows a signed provider's registration and
// revocation without a reload; the trust page shows the certificate
// revoked and the CRL; the evidence page is closed to an anonymous
// browser, opens after the operator signs in with a key, and shows a
// correlation's chain verified step by step; the audit matrix and the
// composition graph render. Each page is screenshotted.
func TestBrowserDashboard(t *testing.T) {
	chromium(t)
	m := startMesh(t)
	ctx := browser(t, 4*time.Minute)

	// The registry, live: a marker set in the page survives every change,
	// which a reload would lose.
	do(t, ctx, "registry page",
		chromedp.Navigate(m.base+"/ui/"),
		chromedp.WaitVisible(css(`body[data-live="1"]`)),
		chromedp.WaitVisible(css(`tr[data-name="kvhost"].trusted`)))
	eval[int](t, ctx, `window.__notReloaded = 7`)
	run(t, m.env, "", m.capmesh, "registry", "enroll", enrolledKey, "--role", "role:client", "--validity", "24h")
	run(t, m.env, descriptorJSON(t), m.capmesh, "call", "ipc.register", "-")
	do(t, ctx, "the registration did not show", chromedp.WaitVisible(css(`tr[data-name="planner-1"].trusted`)))
	if r := text(t, ctx, `tr[data-name="planner-1"] .reason`); !strings.Contains(r, "enrolled: join certificate") {
		t.Fatalf("planner-1's verdict: %q", r)
	}
	if v := eval[int](t, ctx, `window.__notReloaded || 0`); v != 7 {
		t.Fatal("the page reloaded to show the registration")
	}
	screenshot(t, ctx, "dashboard-registry")
	run(t, m.env, "", m.capmesh, "registry", "revoke", "--key", enrolledKey, "--reason", "key_compromise")
	do(t, ctx, "the revocation did not show",
		chromedp.WaitNotPresent(css(`tr[data-name="planner-1"]`)),
		chromedp.WaitVisible(css(`tr[data-name="kvhost"]`)))
	if v := eval[int](t, ctx, `window.__notReloaded || 0`); v != 7 {
		t.Fatal("the page reloaded to show the revocation")
	}

	// Join certificates and revocations.
	do(t, ctx, "trust page", chromedp.Navigate(m.base+"/ui/trust"), chromedp.WaitVisible(css(`#certificates tr.cert`)))
	if st, crl := text(t, ctx, `#certificates tr.cert .badge`), text(t, ctx, `#crl tr.revoked`); st != "revoked" || !strings.Contains(crl, "key_compromise") {
		t.Fatalf("trust page: certificate %q, CRL row %q", st, crl)
	}
	screenshot(t, ctx, "dashboard-trust")

	browserEvidence(t, ctx, m)

	// The audit matrix and the composition graph.
	do(t, ctx, "audit page", chromedp.Navigate(m.base+"/ui/audit"), chromedp.WaitVisible(css(`#audit tbody tr`)))
	if rows := text(t, ctx, `#audit tbody`); !strings.Contains(rows, "kvhost") || !strings.Contains(rows, "capmesh") {
		t.Fatalf("audit matrix without the node and the host: %q", rows)
	}
	screenshot(t, ctx, "dashboard-audit")
	do(t, ctx, "composition page", chromedp.Navigate(m.base+"/ui/compose"),
		chromedp.WaitVisible(css(`svg#graph g.host`)), chromedp.WaitVisible(css(`svg#graph g.domain`)))
	// An SVG element has no innerText: its textContent.
	if l, err := chromedp.Run(ctx, chromedp.TextContent(css(`svg#graph g.host text.label`))); err != nil || l != "kvhost" {
		t.Fatalf("composition graph: first host %q (%v)", l, err)
	}
	screenshot(t, ctx, "dashboard-compose")
}

// browserEvidence: closed to the anonymous browser, open once the
// operator signs in; the chain of a real correlation verified step by step.
func browserEvidence(t *testing.T, ctx context.Context, m *meshEnv) {
	t.Helper()
	run(t, m.env, "", m.capmesh, "call", "chp.invoke",
		`{"capability_id":"conformance.echo","payload":{"value":"seen in a browser"},"correlation":{"correlation_id":"corr-browser"}}`)
	do(t, ctx, "evidence page without a key", chromedp.Navigate(m.base+"/ui/evidence?corr=corr-browser"), chromedp.WaitVisible(css(`#error`)))
	if msg := text(t, ctx, `#error`); !strings.Contains(msg, "authentication required") {
		t.Fatalf("evidence without a key: %q", msg)
	}
	do(t, ctx, "signing in",
		chromedp.Navigate(m.base+"/ui/login"),
		chromedp.WaitVisible(css(`#key`)),
		chromedp.SendKeys(css(`#key`), browserKey),
		chromedp.Click(css(`#signin`)),
		chromedp.WaitVisible(css(`.who form`)))
	do(t, ctx, "opening a correlation",
		chromedp.Navigate(m.base+"/ui/evidence"),
		chromedp.WaitVisible(css(`#corr`)),
		chromedp.SendKeys(css(`#corr`), "corr-browser"),
		chromedp.Submit(css(`#corr`)),
		chromedp.WaitVisible(css(`#chain-verdict`)))
	verdict := text(t, ctx, `#chain-verdict`)
	steps := eval[int](t, ctx, `document.querySelectorAll("#timeline li.step").length`)
	ok := eval[int](t, ctx, `document.querySelectorAll("#timeline li.step.ok").length`)
	if verdict != "chain verified" || steps < 3 || ok != steps {
		t.Fatalf("evidence: verdict %q, %d of %d steps verified", verdict, ok, steps)
	}
	screenshot(t, ctx, "dashboard-evidence")
}

// TestBrowserStandaloneDashboard serves the dashboard with `capmesh
// dashboard --node URL`, sees the registry live through it, and signs in
// to read the node's evidence (a wrong key is refused by the node).
func TestBrowserStandaloneDashboard(t *testing.T) {
	chromium(t)
	m := startMesh(t)
	ui := freePort(t)
	d := start(t, m.env, m.capmesh, "dashboard", "--node", m.base, "--listen", ui)
	waitHTTP(t, d, "http://"+ui+"/ui/static/style.css")
	ctx := browser(t, 3*time.Minute)
	err := chromedp.Do(ctx,
		chromedp.Navigate("http://"+ui+"/ui/"),
		chromedp.WaitVisible(css(`body[data-live="1"]`)),
		chromedp.WaitVisible(css(`tr[data-name="kvhost"]`)))
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the standalone dashboard never showed kvhost live:\n%s", d.out.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	if rev := text(t, ctx, `#revision`); rev == "" || rev == "0" {
		t.Fatalf("revision %q after a registration", rev)
	}

	// The standalone dashboard holds no keys: the node refuses its
	// evidence to the anonymous browser, and a wrong key at sign-in; the
	// operator's key, once signed in, is presented to the node.
	run(t, m.env, "", m.capmesh, "call", "chp.invoke",
		`{"capability_id":"conformance.echo","payload":{"value":"v"},"correlation":{"correlation_id":"corr-standalone"}}`)
	do(t, ctx, "evidence without a key", chromedp.Navigate("http://"+ui+"/ui/evidence?corr=corr-standalone"), chromedp.WaitVisible(css(`#evidence-error`)),
		chromedp.WaitVisible(css(`main a[href="/ui/login"]`)))
	if msg := text(t, ctx, `#evidence-error`); !strings.Contains(msg, "authentication required") {
		t.Fatalf("evidence without a key through the standalone dashboard: %q", msg)
	}
	do(t, ctx, "a wrong key",
		chromedp.Navigate("http://"+ui+"/ui/login"),
		chromedp.WaitVisible(css(`#key`)),
		chromedp.SendKeys(css(`#key`), "not-the-key"),
		chromedp.Click(css(`#signin`)),
		chromedp.WaitVisible(css(`#login-error`)))
	if msg := text(t, ctx, `#login-error`); msg != "the node refused the key" {
		t.Fatalf("sign-in with a wrong key: %q", msg)
	}
	do(t, ctx, "signing in",
		chromedp.SendKeys(css(`#key`), browserKey),
		chromedp.Click(css(`#signin`)),
		chromedp.WaitVisible(css(`.who form`)),
		chromedp.Navigate("http://"+ui+"/ui/evidence?corr=corr-standalone"),
		chromedp.WaitVisible(css(`#chain-verdict`)))
	if v := text(t, ctx, `#chain-verdict`); v != "chain verified" {
		t.Fatalf("evidence after signing in: %q", v)
	}
}
