package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/node"
)

// hostileName and hostileCaps are what a provider controls in its
// registration: its name (which identity.get must confirm), its
// capabilities and its version. Each tries to break out of the markup
// around it: text, an attribute, a <title>, an SVG <text>.
const (
	hostileName    = `<img src=x onerror=alert(1)>`
	hostileVersion = `</title><script>alert(2)</script>`
)

var hostileCaps = []string{`"><script>alert(3)</script>`, `x.y' onmouseover='alert(4)`, `svg.</text><script>alert(5)</script>`}

// serveIdentity answers identity.get on a Unix socket with primal name,
// as any process of the node's user may.
func serveIdentity(t *testing.T, path, name string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					var req struct {
						ID json.RawMessage `json:"id"`
					}
					_ = json.Unmarshal(sc.Bytes(), &req)
					res, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{"primal": name, "version": hostileVersion}})
					if _, err := c.Write(append(res, '\n')); err != nil {
						return
					}
				}
			}()
		}
	}()
}

// TestDashboardEscapesHostileProviders registers a provider whose name,
// capabilities and version are markup and checks that no page of the
// dashboard carries them unescaped — the registry page, the rows the live
// update fetches, the composition graph (SVG) — while the registry does
// hold them as given (so the test is not vacuous).
func TestDashboardEscapesHostileProviders(t *testing.T) {
	runDir := env(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Memory: true, HTTP: "127.0.0.1:0", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()
	sock := filepath.Join(runDir, "hostile.sock")
	serveIdentity(t, sock, hostileName)
	c, err := jsonrpc.Dial(ctx, "unix", n.Addr("unix"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Call(ctx, "ipc.register", map[string]any{"name": hostileName, "capabilities": hostileCaps, "endpoint": "unix://" + sock, "version": hostileVersion}, nil); err != nil {
		t.Fatalf("the registry refused the hostile registration: %v", err)
	}
	var list json.RawMessage
	if err := c.Call(ctx, "ipc.list", nil, &list); err != nil {
		t.Fatal(err)
	}
	var decoded struct {
		Services []struct {
			Name string `json:"primal_id"`
		} `json:"services"`
	}
	if err := json.Unmarshal(list, &decoded); err != nil || len(decoded.Services) != 1 || decoded.Services[0].Name != hostileName {
		t.Fatalf("ipc.list: %s (%v)", list, err)
	}

	base := "http://" + n.Addr("http")
	for _, path := range []string{"/ui/", "/ui/registry/rows", "/ui/compose"} {
		body := get(t, ctx, base+path)
		for _, s := range append([]string{hostileName, hostileVersion}, hostileCaps...) {
			if strings.Contains(body, s) {
				t.Errorf("%s carries %q unescaped", path, s)
			}
		}
		for _, tag := range []string{"<script>", "<img", "onmouseover='"} {
			if strings.Contains(body, tag) {
				t.Errorf("%s carries %q", path, tag)
			}
		}
		// The name is shown, escaped.
		if !strings.Contains(body, html.EscapeString(hostileName)) && !strings.Contains(body, "&lt;img src=x onerror=alert(1)&gt;") {
			t.Errorf("%s does not show the provider's name:\n%s", path, body)
		}
	}
	// A correlation id typed into (or linked to) the evidence page is
	// reflected in its title, its form and the node's error: escaped.
	hostileCorr := `"><script>alert(6)</script>`
	status, body := getStatus(t, ctx, base+"/ui/evidence?corr="+url.QueryEscape(hostileCorr))
	if status != http.StatusNotFound || strings.Contains(body, "<script>") || !strings.Contains(body, "no evidence for correlation") {
		t.Errorf("evidence page for a hostile correlation id: %d\n%s", status, body)
	}
}

func get(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	status, body := getStatus(t, ctx, url)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, status, body)
	}
	return body
}

func getStatus(t *testing.T, ctx context.Context, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestDashboardEventsFollowTheRegistry opens the registry's event stream
// (what the page's script listens to), registers a provider and sees a
// "registry" event; then stops the node with the stream still open, which
// must not hold the stop (the HTTP server's shutdown waits for it).
func TestDashboardEventsFollowTheRegistry(t *testing.T) {
	runDir := env(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Memory: true, HTTP: "127.0.0.1:0", Version: "1.0.0", DrainTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = n.Stop(ctx)
		}
	}()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.Addr("http")+"/ui/events?since=0", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); res.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("events: %d %s", res.StatusCode, ct)
	}
	events := make(chan string, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if e, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				events <- e
			}
		}
	}()
	next := func() string {
		select {
		case e := <-events:
			return e
		case <-ctx.Done():
			t.Fatal("no event within 60 s")
		}
		return ""
	}
	if e := next(); e != "hello" {
		t.Fatalf("first event %q", e)
	}
	sock := filepath.Join(runDir, "friendly.sock")
	serveIdentity(t, sock, "friendly")
	c, err := jsonrpc.Dial(ctx, "unix", n.Addr("unix"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Call(ctx, "ipc.register", map[string]any{"name": "friendly", "capabilities": []string{"f.x"}, "endpoint": "unix://" + sock}, nil); err != nil {
		t.Fatal(err)
	}
	if e := next(); e != "registry" {
		t.Fatalf("after a registration: event %q", e)
	}
	start := time.Now()
	stopped = true
	if err := n.Stop(ctx); err != nil {
		t.Fatalf("Stop with an event stream open: %v", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Stop took %v with an event stream open", d)
	}
	for range events {
	}
}
