// Package gateway is a CHP routing intermediary (chp-v0.2.md §10
// Forwarding, §11, §13.2; chp-http-binding.md §3, §4a, §4b): it serves the
// CHP HTTP binding in front of member CHP hosts reached over HTTP.
//
//	gw, err := gateway.New(gateway.Config{Members: []string{"http://127.0.0.1:8951"}})
//	gw.Discover(ctx)                 // the routing table, from each member's /host
//	http.Handle("/", gw.Handler())   // /host, /capabilities, /invoke, /replay, /export
//
// Discovery merges the members' catalogs, each capability annotated with
// the host ids that own it ("hosts"). /invoke forwards the caller's
// envelope to an owner with its correlation, invocation id and mandate
// unchanged, failing over to the next owner when one is unreachable; when
// no owner is reachable the answer is a processed host_unreachable denial
// (HTTP 200). The gateway keeps its own hash-chained evidence — health
// transitions and its denials — and merges it into stitched replays.
// /export assembles the members' bundles into a task bundle, or answers
// 503 naming the members it could not reach; /verify verifies that task
// bundle as a unit (federated). A result cache keyed by the
// client's invocation id makes a retried id replay at the gateway, whichever
// owner served it.
package gateway

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/tracing"
)

// Config configures a Gateway. Zero values take the documented defaults.
type Config struct {
	// HostID is the gateway's own host id, the host_id of its evidence.
	// Default "capmesh-gateway".
	HostID string
	// Version is the gateway's implementation version (host_version).
	// Default "0.0.0-dev".
	Version string
	// Members are the base URLs (http or https) of the member hosts, in
	// routing preference order. At least one is required.
	Members []string
	// Keys, when set, are the X-CHP-Key values the gateway accepts from
	// callers; with none, every caller is accepted (local-first, as the
	// binding). Members are always reached without credentials.
	Keys []string
	// Store holds the gateway's own evidence. Default: in memory. A store
	// that also keeps results (evidence.ResultStore) keeps the exactly-once
	// cache across gateway restarts.
	Store evidence.Store
	// Client reaches the members. Default: a client with Timeout.
	Client *http.Client
	// Timeout bounds one request to one member. Default 30 s.
	Timeout time.Duration
	// RetryAfter is the retry_after_s advice of a host_unreachable denial.
	// Default 5 s.
	RetryAfter time.Duration
	// Rediscover is how long a member that could not be discovered is left
	// alone before a /host or /invoke tries it again, so that a black-holed
	// member does not slow every request. Default 5 s.
	Rediscover time.Duration
	// ResultWindow and ResultCacheSize bound the exactly-once result cache
	// (§13.2). Defaults 10 min and 4096 results.
	ResultWindow    time.Duration
	ResultCacheSize int
	// MaxBodyBytes bounds request and member response bodies. Default 4 MiB.
	MaxBodyBytes int64
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// member is one member host as the routing table knows it.
type member struct {
	url        string
	hostID     string
	caps       []map[string]json.RawMessage // as its /host listed them
	discovered bool
	healthy    bool
	tried      time.Time // the last discovery attempt
}

// Gateway routes CHP invocations to member hosts. It is safe for
// concurrent use.
type Gateway struct {
	cfg    Config
	log    *slog.Logger
	client *http.Client
	store  evidence.Store
	cache  *resultCache
	mux    *http.ServeMux

	mu      sync.Mutex // guards the members' mutable state
	members []*member

	flightMu sync.Mutex
	inFlight map[string]chan struct{} // client invocation ids being routed
}

// New builds a gateway from cfg. It does not contact the members: call
// Discover once they are up (members first is the fixture profile's start
// order); an invocation or a /host also discovers members not yet known.
func New(cfg Config) (*Gateway, error) {
	if len(cfg.Members) == 0 {
		return nil, errors.New("gateway: no member hosts")
	}
	if cfg.HostID == "" {
		cfg.HostID = "capmesh-gateway"
	}
	if cfg.Version == "" {
		cfg.Version = "0.0.0-dev"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = 5 * time.Second
	}
	if cfg.Rediscover <= 0 {
		cfg.Rediscover = 5 * time.Second
	}
	if cfg.ResultWindow <= 0 {
		cfg.ResultWindow = 10 * time.Minute
	}
	if cfg.ResultCacheSize <= 0 {
		cfg.ResultCacheSize = 4096
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 4 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	g := &Gateway{cfg: cfg, log: cfg.Logger, client: cfg.Client, store: cfg.Store, inFlight: map[string]chan struct{}{}}
	if g.client == nil {
		g.client = &http.Client{Timeout: cfg.Timeout}
	}
	if g.store == nil {
		g.store = evidence.NewMemory()
	}
	seen := map[string]bool{}
	for _, raw := range cfg.Members {
		u, err := normalizeURL(raw)
		if err != nil {
			return nil, fmt.Errorf("gateway: member %q: %w", raw, err)
		}
		if seen[u] {
			return nil, fmt.Errorf("gateway: member %s listed twice", u)
		}
		seen[u] = true
		g.members = append(g.members, &member{url: u, healthy: true})
	}
	g.cache = newResultCache(cfg.ResultCacheSize, cfg.ResultWindow, cfg.Now)
	if rs, ok := g.store.(evidence.ResultStore); ok {
		if err := g.cache.load(context.Background(), rs); err != nil {
			return nil, fmt.Errorf("gateway: recorded results: %w", err)
		}
	}
	g.mux = g.routes()
	return g, nil
}

// normalizeURL checks a member base URL and drops a trailing slash.
func normalizeURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.New("want an http(s)://host[:port] base URL")
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", errors.New("a base URL carries no query, fragment or credentials")
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// HostID returns the gateway's host id.
func (g *Gateway) HostID() string { return g.cfg.HostID }

// Patterns are the http.ServeMux patterns Handler serves, for mounting the
// gateway beside other routes.
func Patterns() []string {
	return []string{"GET /host", "GET /capabilities", "POST /invoke",
		"GET /replay/{corr...}", "POST /replay", "GET /export/{corr...}", "GET /verify/{corr...}"}
}

// Handler serves the gateway's CHP HTTP routes (Patterns).
func (g *Gateway) Handler() http.Handler { return g.mux }

func (g *Gateway) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /host", g.authed(g.serveHost))
	mux.HandleFunc("GET /capabilities", g.authed(func(w http.ResponseWriter, r *http.Request) {
		g.discoverMissing(r.Context())
		writeJSON(w, http.StatusOK, map[string]any{"capabilities": g.catalog()})
	}))
	mux.HandleFunc("POST /invoke", g.authed(g.serveInvoke))
	mux.HandleFunc("GET /replay/{corr...}", g.authed(func(w http.ResponseWriter, r *http.Request) {
		g.serveReplay(w, r, r.PathValue("corr"), nil)
	}))
	mux.HandleFunc("POST /replay", g.authed(func(w http.ResponseWriter, r *http.Request) {
		body, ok := g.readBody(w, r)
		if !ok {
			return
		}
		var q chp.ReplayQuery
		if err := json.Unmarshal(body, &q); err != nil || q.CorrelationID == "" {
			httpError(w, http.StatusBadRequest, "bad_request", "a replay query needs a correlation_id")
			return
		}
		g.serveReplay(w, r, q.CorrelationID, body)
	}))
	mux.HandleFunc("GET /export/{corr...}", g.authed(g.serveExport))
	mux.HandleFunc("GET /verify/{corr...}", g.authed(g.serveVerify))
	return mux
}

// authed checks X-CHP-Key when the gateway has keys.
func (g *Gateway) authed(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if len(g.cfg.Keys) > 0 {
			got := []byte(r.Header.Get("X-CHP-Key"))
			ok := false
			for _, k := range g.cfg.Keys {
				if subtle.ConstantTimeCompare(got, []byte(k)) == 1 {
					ok = true
				}
			}
			if !ok {
				httpError(w, http.StatusUnauthorized, "unauthorized", "missing or wrong X-CHP-Key")
				return
			}
		}
		next(w, r)
	}
}

func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			httpError(w, http.StatusRequestEntityTooLarge, "payload_too_large", err.Error())
		} else {
			httpError(w, http.StatusBadRequest, "bad_request", err.Error())
		}
		return nil, false
	}
	return body, true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"response encoding failed"}}`)
	}
	writeRaw(w, status, b)
}

func writeRaw(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func httpError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": code, "message": msg}})
}

// memberDo sends one request to a member; err is a transport failure (the
// member unreachable), any status is its answer.
func (g *Gateway) memberDo(ctx context.Context, method, base, path string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if sc, ok := tracing.FromContext(ctx); ok && path == "/invoke" {
		// the caller's trace, on its invocation only: not on a discovery
		// probe (GET /host) the invocation happened to trigger
		req.Header.Set("Traceparent", sc.Traceparent())
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, g.cfg.MaxBodyBytes+1))
	if err != nil {
		return 0, nil, fmt.Errorf("reading %s%s: %w", base, path, err)
	}
	if int64(len(b)) > g.cfg.MaxBodyBytes {
		return 0, nil, fmt.Errorf("%s%s: response over %d bytes", base, path, g.cfg.MaxBodyBytes)
	}
	return resp.StatusCode, b, nil
}

// memberURLs lists the members' URLs in configured order.
func (g *Gateway) memberURLs() []string {
	out := make([]string, len(g.members))
	for i, m := range g.members {
		out[i] = m.url
	}
	return out
}

// snapshot copies a member's state under the lock.
func (g *Gateway) snapshot() []member {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]member, len(g.members))
	for i, m := range g.members {
		out[i] = *m
		out[i].caps = slices.Clone(m.caps)
	}
	return out
}
