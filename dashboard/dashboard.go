package dashboard

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/capmesh/capmesh/access"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/jsonrpc/jhttp"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Prefix is where the dashboard lives on a listener.
const Prefix = "/ui"

// Config configures a Dashboard.
type Config struct {
	// Node returns the base URL of the node's HTTP listener
	// ("http://127.0.0.1:8080"). It is called per request, so a node may
	// hand over its address before the listener is bound.
	Node func() string
	// NodeOnThisMachine says that the node runs on this machine (a node
	// serving its own dashboard), whatever address Node names. Otherwise
	// the node is judged by that address (endpoint.RegistryAnswers): at
	// one that is not this machine's, the sockets and loopback addresses
	// it lists are another machine's and the composition page does not
	// connect to them.
	NodeOnThisMachine bool
	// Policy decides which routes a caller may use (access.Policy.Authorize
	// with each route's Op). Nil is a keyless, open policy: the dashboard
	// then defers to the node, which refuses what the caller may not see.
	Policy *access.Policy
	// AuditDir is the socket directory the audit matrix covers; "" is the
	// biomeos directory (endpoint.SocketDir).
	AuditDir string
	// HTTPClient reaches the node; nil is a client of its own.
	HTTPClient *http.Client
	// Logger; nil is slog.Default().
	Logger *slog.Logger
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
}

// Dashboard serves the web UI. Close ends its open event streams.
type Dashboard struct {
	cfg      Config
	log      *slog.Logger
	hc       *http.Client
	pages    map[string]*template.Template
	sessions *sessions
	audit    auditCache

	quiet     time.Duration // refreshQuiet; shorter in tests
	streams   chan struct{} // a slot per open event stream
	done      chan struct{}
	closeOnce sync.Once
}

// maxStreams bounds the open event streams of one dashboard.
const maxStreams = 32

// New returns a dashboard for the node cfg.Node names.
func New(cfg Config) (*Dashboard, error) {
	if cfg.Node == nil {
		return nil, errors.New("dashboard: Config.Node is required")
	}
	if cfg.Policy == nil {
		cfg.Policy = access.NewPolicy(access.Config{Open: true})
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	d := &Dashboard{cfg: cfg, log: cfg.Logger, hc: cfg.HTTPClient, sessions: newSessions(cfg.Now), quiet: refreshQuiet,
		streams: make(chan struct{}, maxStreams), done: make(chan struct{})}
	if d.hc == nil {
		d.hc = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8, IdleConnTimeout: time.Minute}}
	}
	var err error
	if d.pages, err = parseTemplates(); err != nil {
		return nil, err
	}
	return d, nil
}

// Close ends the open event streams (a node calls it when it stops, since
// an HTTP server's shutdown waits for them).
func (d *Dashboard) Close() { d.closeOnce.Do(func() { close(d.done) }) }

// Route is one route of the dashboard and the access operation it is
// authorised as.
type Route struct {
	Pattern string // a net/http ServeMux pattern
	Op      access.Op
}

// Routes lists every route of the dashboard: the access matrix test and
// docs/access.md cover each.
func Routes() []Route {
	return []Route{
		{"GET " + Prefix, access.OpPublic}, // redirects to Prefix+"/"
		{"GET " + Prefix + "/{$}", access.OpPublic},
		{"GET " + Prefix + "/registry/rows", access.OpPublic},
		{"GET " + Prefix + "/events", access.OpPublic},
		{"GET " + Prefix + "/trust", access.OpPublic},
		{"GET " + Prefix + "/compose", access.OpPublic},
		{"GET " + Prefix + "/evidence", access.OpEvidence},
		{"GET " + Prefix + "/audit", access.OpDescribe},
		{"GET " + Prefix + "/login", access.OpPublic},
		{"POST " + Prefix + "/login", access.OpPublic},
		{"POST " + Prefix + "/logout", access.OpPublic},
		{"GET " + Prefix + "/static/{file}", access.OpPublic},
	}
}

// Handler returns the dashboard's routes (all under Prefix; the bare
// Prefix redirects to Prefix+"/").
func (d *Dashboard) Handler() http.Handler {
	handlers := map[string]http.HandlerFunc{
		"GET " + Prefix:                    http.RedirectHandler(Prefix+"/", http.StatusFound).ServeHTTP,
		"GET " + Prefix + "/{$}":           d.registryPage,
		"GET " + Prefix + "/registry/rows": d.registryRows,
		"GET " + Prefix + "/events":        d.events,
		"GET " + Prefix + "/trust":         d.trustPage,
		"GET " + Prefix + "/compose":       d.composePage,
		"GET " + Prefix + "/evidence":      d.evidencePage,
		"GET " + Prefix + "/audit":         d.auditPage,
		"GET " + Prefix + "/login":         d.loginPage,
		"POST " + Prefix + "/login":        d.login,
		"POST " + Prefix + "/logout":       d.logout,
		"GET " + Prefix + "/static/{file}": d.static,
	}
	mux := http.NewServeMux()
	for _, r := range Routes() {
		mux.Handle(r.Pattern, d.guard(r.Op, handlers[r.Pattern]))
	}
	return securityHeaders(mux)
}

// securityHeaders sets what every answer carries: no script but the
// dashboard's own file, no framing, no sniffing, no referrer.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// caller is who a request is: its principal under the dashboard's policy
// and the key it presented (forwarded to the node).
type caller struct {
	pr     access.Principal
	key    string
	signed bool // the key came from a signed-in session
}

type callerKey struct{}

func callerOf(r *http.Request) caller {
	c, _ := r.Context().Value(callerKey{}).(caller)
	return c
}

// guard establishes who the caller is — X-CHP-Key, else the session
// cookie, else anonymous — and authorises op under the policy before the
// route runs. A wrong key is a 401, as on every HTTP binding.
func (d *Dashboard) guard(op access.Op, next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := caller{pr: access.Principal{Kind: access.Anonymous, Door: "http"}}
		key := r.Header.Get(access.HeaderKey)
		if key == "" {
			if s, ok := d.sessions.get(r); ok {
				key, c.signed = s, true
			}
		}
		if key != "" {
			pr, err := d.cfg.Policy.AuthenticateKey(key)
			if err != nil && c.signed {
				// The node's keys changed since the sign-in: the session
				// ends, and the browser is anonymous again (not locked out
				// of the public pages and the sign-in form).
				d.sessions.drop(r)
				c.signed, key, pr, err = false, "", c.pr, nil
			}
			if err != nil {
				d.fail(w, r, http.StatusUnauthorized, err)
				return
			}
			pr.Door = "http"
			c.pr, c.key = pr, key
		}
		if err := d.cfg.Policy.Authorize(c.pr, op); err != nil {
			status := http.StatusUnauthorized
			if code, _ := jsonrpc.ErrorCode(err); code == access.CodeForbidden {
				status = http.StatusForbidden
			}
			d.fail(w, r, status, err)
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

// nodeError is a refusal or failure of the node, shown as such.
type nodeError struct {
	status int // the HTTP status to answer with
	err    error
}

func (e *nodeError) Error() string { return e.err.Error() }
func (e *nodeError) Unwrap() error { return e.err }

// call calls method on the node's JSON-RPC bridge as the request's caller
// (its key, if any, as X-CHP-Key).
func (d *Dashboard) call(ctx context.Context, r *http.Request, method string, params, result any) error {
	c := callerOf(r)
	hc := d.hc
	if c.key != "" {
		hc = &http.Client{Transport: keyTransport{key: c.key, next: d.transport()}, Timeout: d.hc.Timeout}
	}
	cl := jhttp.NewClient(strings.TrimRight(d.cfg.Node(), "/")+"/jsonrpc", hc)
	err := cl.Call(ctx, method, params, result)
	if err == nil {
		return nil
	}
	status := http.StatusBadGateway
	if code, ok := jsonrpc.ErrorCode(err); ok {
		switch code {
		case access.CodeUnauthenticated:
			status = http.StatusUnauthorized
		case access.CodeForbidden:
			status = http.StatusForbidden
		default:
			status = http.StatusUnprocessableEntity
		}
	} else if strings.Contains(err.Error(), "HTTP 401") {
		status = http.StatusUnauthorized
	}
	return &nodeError{status: status, err: fmt.Errorf("%s: %w", method, err)}
}

func (d *Dashboard) transport() http.RoundTripper {
	if d.hc.Transport != nil {
		return d.hc.Transport
	}
	return http.DefaultTransport
}

// keyTransport presents the operator's key to the node.
type keyTransport struct {
	key  string
	next http.RoundTripper
}

func (t keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(access.HeaderKey, t.key)
	return t.next.RoundTrip(r)
}

// page is what every page template gets besides its own data.
type page struct {
	Title  string
	Nav    string
	Signed bool // an operator is signed in
	Keyed  bool // the policy has keys (sign-in means something here)
	Data   any
}

// render executes the page template name with data.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	t, ok := d.pages[name]
	if !ok {
		http.Error(w, "no such page", http.StatusInternalServerError)
		return
	}
	c := callerOf(r)
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", page{Title: title, Nav: name, Signed: c.signed, Keyed: d.cfg.Policy.Keyed(), Data: data}); err != nil {
		d.log.Error("dashboard: rendering", "page", name, "err", err)
		http.Error(w, "rendering failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail answers an error page (or, for a script's fetch, plain text).
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	var ne *nodeError
	if errors.As(err, &ne) {
		status = ne.status
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", access.HeaderKey)
	}
	if r.Header.Get("Accept") == "text/event-stream" || strings.HasSuffix(r.URL.Path, "/rows") {
		http.Error(w, err.Error(), status)
		return
	}
	if d.pages == nil {
		http.Error(w, err.Error(), status)
		return
	}
	d.render(w, r, status, "error", http.StatusText(status), map[string]any{"Status": status, "Message": err.Error(), "SignIn": status == http.StatusUnauthorized})
}

// static serves the embedded stylesheet and script.
func (d *Dashboard) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	data, err := fs.ReadFile(assets, "static/"+name)
	if err != nil || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	switch {
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	_, _ = w.Write(data)
}

// funcs are the template helpers.
var funcs = template.FuncMap{
	"short": func(s string) string {
		if len(s) > 14 {
			return s[:12] + "…"
		}
		return s
	},
	"join": strings.Join,
	"json": func(v any) string {
		b, _ := json.MarshalIndent(v, "", "  ")
		return string(b)
	},
}

// parseTemplates parses every page with the shared layout.
func parseTemplates() (map[string]*template.Template, error) {
	names, err := fs.Glob(assets, "templates/*.html")
	if err != nil {
		return nil, err
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New(base).Funcs(funcs).ParseFS(assets, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("dashboard: template %s: %w", n, err)
		}
		out[base] = t
	}
	return out, nil
}

// withKey is ctx with the caller's key replaced by key (the sign-in probe).
func withKey(ctx context.Context, key string) context.Context {
	c, _ := ctx.Value(callerKey{}).(caller)
	c.key = key
	return context.WithValue(ctx, callerKey{}, c)
}
