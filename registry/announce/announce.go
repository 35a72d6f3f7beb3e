// Package announce is the host side of registration: it finds a capmesh
// node (or any ecoPrimals-compatible registry), registers the host's
// capabilities, keeps the registration alive, re-registers after the node
// restarts, and stays quiet — one warning, not a stream — while no node is
// reachable, so a host always starts and serves standalone.
//
// Flow: Start → locate the node (Config.Node, else $DISCOVERY_SOCKET, else
// capmesh.sock or songbird.sock in the biomeos socket directory — the
// family-scoped names only, when $FAMILY_ID is set) → over a local Unix
// socket, unsigned ipc.register {name, capabilities, endpoint} then
// ipc.heartbeat at a third of the TTL the node returned, both carrying the
// registration token the node returned; a registry without ipc.heartbeat
// (Songbird) is kept by registering again at the same pace; over TCP/HTTP,
// a signed RFC-005 descriptor (ipc.register {"descriptor": …}) refreshed
// at half its TTL → on any failure, reconnect with backoff and register
// again (one WARN per outage, one INFO when registered again; the backoff
// starts afresh after each success) → on Close, a local registration is
// withdrawn (ipc.unregister with its token), so the node stops listing the
// host at once instead of at the end of its TTL.
//
// The package depends only on jsonrpc and registry/descriptor, so the host
// library can import it without pulling in SQLite or an HTTP server.
package announce

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry/descriptor"
)

// Config describes the host and where to announce it.
type Config struct {
	// Name is the primal name; identity.get on Endpoint must answer it.
	Name string
	// Capabilities are the tags to register.
	Capabilities []string
	// Endpoint is where the host serves JSON-RPC: "unix:///path" for a
	// local registration, "tcp://host:port" for a signed one.
	Endpoint string
	// SignedEndpoint is the "tcp://host:port" a signed registration (to a
	// TCP or HTTP node) announces when Endpoint is a Unix socket, which a
	// remote node cannot reach. Default: Endpoint.
	SignedEndpoint string
	// Version is the host's version (informational).
	Version string
	// Node is the node address ("unix:///path", a bare path, "tcp://h:p"
	// or "http://h:p/"). Empty: $DISCOVERY_SOCKET, then capmesh.sock and
	// songbird.sock in the biomeos socket directory.
	Node string
	// Key signs descriptors for non-local nodes. Required for those.
	Key ed25519.PrivateKey
	// Network is the descriptor's network_name. Default "capmesh".
	Network string
	// TTL of a signed descriptor; it is refreshed at half. Default 10 min.
	TTL time.Duration
	// Interval caps the time between heartbeats of a local registration.
	// They come at a third of the TTL the node returns (ttl_seconds or
	// expires_at of ipc.register), at most every Interval. Default 30 s,
	// used alone when the node returns no TTL.
	Interval time.Duration
	// MaxBackoff caps the reconnect delay. Default 30 s.
	MaxBackoff time.Duration
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Dial connects to the node. Default: jsonrpc.Dial / jhttp.NewClient.
	Dial func(ctx context.Context, addr string) (jsonrpc.Caller, error)

	// timeScale > 1 runs the session's clock that many times faster
	// (tests against a registry with a fast clock; see export_test.go).
	timeScale float64
}

// Session is a running announcement. Close stops it.
type Session struct {
	cfg    Config
	cancel context.CancelFunc
	done   chan struct{}

	mu         sync.Mutex
	registered bool
	node       string
	changed    chan struct{}
	token      string // registration token of the local registration

	// Outage state, owned by the run goroutine.
	down      bool      // an outage was reported (WARN) and not yet ended
	downSince time.Time // when it began
	ok        bool      // the current session registered at least once
}

// Start begins announcing in the background and returns at once.
func Start(ctx context.Context, cfg Config) *Session {
	if cfg.Network == "" {
		cfg.Network = "capmesh"
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 10 * time.Minute
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 30 * time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Dial == nil {
		cfg.Dial = dial
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Session{cfg: cfg, cancel: cancel, done: make(chan struct{}), changed: make(chan struct{})}
	go s.run(ctx)
	return s
}

// Close stops the session and withdraws a local registration
// (ipc.unregister with its registration token, waiting at most
// unregisterTimeout), so that the node stops listing a host that is going
// away. A signed registration is left to its TTL.
func (s *Session) Close() error {
	s.cancel()
	<-s.done
	return nil
}

// Registered reports whether the last attempt succeeded, and at which node.
func (s *Session) Registered() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registered, s.node
}

// Changed returns a channel closed at the next change of Registered.
func (s *Session) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

func (s *Session) set(ok bool, node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.registered == ok && s.node == node {
		return
	}
	s.registered, s.node = ok, node
	close(s.changed)
	s.changed = make(chan struct{})
}

// Candidates returns the node addresses Start tries, in order.
func Candidates(cfg Config) []string {
	if cfg.Node != "" {
		return []string{cfg.Node}
	}
	if v := os.Getenv("DISCOVERY_SOCKET"); v != "" {
		return []string{v}
	}
	dir := os.Getenv("BIOMEOS_SOCKET_DIR")
	if dir == "" {
		if rt := os.Getenv("XDG_RUNTIME_DIR"); rt != "" {
			dir = filepath.Join(rt, "biomeos")
		} else {
			dir = filepath.Join(os.TempDir(), "biomeos-"+strconv.Itoa(os.Getuid()))
		}
	}
	// A family-scoped host registers only with its family's registry, and a
	// standalone one only with an unscoped registry: families never mix.
	suffix := ".sock"
	if fam := os.Getenv("FAMILY_ID"); fam != "" && fam != "default" {
		suffix = "-" + fam + ".sock"
	}
	var out []string
	for _, name := range []string{"capmesh", "songbird"} {
		out = append(out, filepath.Join(dir, name+suffix))
	}
	return out
}

func isLocal(addr string) bool {
	return strings.HasPrefix(addr, "/") || strings.HasPrefix(addr, "unix://")
}

// dial reaches the node through the one dialer (endpoint), which also
// speaks BTSP to a node of this host's family.
func dial(ctx context.Context, addr string) (jsonrpc.Caller, error) {
	a, err := endpoint.Parse(addr)
	if err != nil {
		return nil, fmt.Errorf("announce: node address %q: want a socket path, unix://, tcp://, host:port or http://", addr)
	}
	return endpoint.DialAddress(ctx, a, nil)
}

// initialBackoff is the first reconnect delay of an outage.
const initialBackoff = 500 * time.Millisecond

func (s *Session) run(ctx context.Context) {
	defer close(s.done)
	backoff := initialBackoff
	for ctx.Err() == nil {
		s.ok = false
		err := s.session(ctx)
		s.set(false, "")
		if ctx.Err() != nil {
			return
		}
		if s.ok {
			backoff = initialBackoff // a new outage starts afresh
		}
		if !s.down {
			s.down, s.downSince = true, time.Now()
			s.cfg.Logger.Warn("announce: not registered with a node; serving standalone and retrying quietly", "name", s.cfg.Name, "err", err)
		} else {
			s.cfg.Logger.Debug("announce: retry failed", "err", err)
		}
		if !s.sleep(ctx, backoff) {
			return
		}
		if backoff *= 2; backoff > s.cfg.MaxBackoff {
			backoff = s.cfg.MaxBackoff
		}
	}
}

// sleep waits d (on the session's clock) or until ctx ends; it reports
// whether ctx is still live.
func (s *Session) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(s.real(d))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// real converts a duration on the session's clock to wall time.
func (s *Session) real(d time.Duration) time.Duration {
	if s.cfg.timeScale > 1 {
		return time.Duration(float64(d) / s.cfg.timeScale)
	}
	return d
}

// markRegistered records a successful registration: an INFO, which says how
// long the outage lasted when one was reported, and the end of the outage.
func (s *Session) markRegistered(addr string) {
	s.ok = true
	if s.down {
		s.cfg.Logger.Info("announce: registered again", "name", s.cfg.Name, "node", addr, "outage", time.Since(s.downSince).Round(time.Millisecond))
		s.down = false
	} else {
		s.cfg.Logger.Info("announce: registered", "name", s.cfg.Name, "node", addr, "capabilities", s.cfg.Capabilities)
	}
	s.set(true, addr)
}

// session connects, registers and keeps the registration alive until an
// error.
func (s *Session) session(ctx context.Context) error {
	var lastErr error
	for _, addr := range Candidates(s.cfg) {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := s.cfg.Dial(dctx, addr)
		cancel()
		if err != nil {
			lastErr = err
			continue
		}
		err = s.serveNode(ctx, c, addr)
		c.Close()
		return err
	}
	if lastErr == nil {
		lastErr = errors.New("no node address")
	}
	return lastErr
}

// register sends ipc.register and returns the TTL the node granted (0 when
// it said nothing about one).
func (s *Session) register(ctx context.Context, c jsonrpc.Caller, addr string) (time.Duration, error) {
	var params map[string]any
	if isLocal(addr) {
		params = map[string]any{"primal_id": s.cfg.Name, "name": s.cfg.Name, "capabilities": s.cfg.Capabilities, "endpoint": s.cfg.Endpoint, "version": s.cfg.Version}
		if tok := s.getToken(); tok != "" {
			params["registration_token"] = tok
		}
	} else {
		if s.cfg.Key == nil {
			return 0, fmt.Errorf("announce: node %s is not local and no signing key is configured", addr)
		}
		ep, err := tcpEndpoint(nonEmpty(s.cfg.SignedEndpoint, s.cfg.Endpoint))
		if err != nil {
			return 0, err
		}
		d := descriptor.New(s.cfg.Name, s.cfg.Network, s.cfg.Key.Public().(ed25519.PublicKey), s.cfg.Capabilities, ep, time.Now(), s.cfg.TTL)
		if err := d.Sign(s.cfg.Key); err != nil {
			return 0, err
		}
		raw, _ := d.MarshalJSON()
		params = map[string]any{"descriptor": jsonRaw(raw)}
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var res struct {
		Token     string    `json:"registration_token"`
		TTL       *float64  `json:"ttl_seconds"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	var raw json.RawMessage
	if err := c.Call(cctx, "ipc.register", params, &raw); err != nil {
		return 0, err
	}
	_ = json.Unmarshal(raw, &res) // a registry may answer true, or anything
	if isLocal(addr) {
		s.setToken(res.Token)
	}
	switch {
	case res.TTL != nil && *res.TTL > 0:
		return time.Duration(*res.TTL * float64(time.Second)), nil
	case !res.ExpiresAt.IsZero():
		// Without a ttl_seconds the expiry is read against our own clock;
		// a skewed registry clock only makes the interval fall back.
		if d := time.Until(res.ExpiresAt); d > 0 && s.cfg.timeScale <= 1 {
			return d, nil
		}
	}
	return 0, nil
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// minInterval bounds the keep-alive pace from below, whatever TTL a
// registry returns.
const minInterval = 50 * time.Millisecond

// keepAliveInterval is a third of the granted TTL (so that two keep-alives
// may fail before the registration lapses), capped by Config.Interval.
func (s *Session) keepAliveInterval(ttl time.Duration) time.Duration {
	iv := s.cfg.Interval
	if ttl > 0 && ttl/3 < iv {
		iv = ttl / 3
	}
	return max(iv, minInterval)
}

// heartbeatUnsupported reports whether err says the registry has no
// ipc.heartbeat: -32601, or -32603 "Unknown method" as Songbird answers.
func heartbeatUnsupported(err error) bool {
	code, ok := jsonrpc.ErrorCode(err)
	if !ok {
		return false
	}
	if code == jsonrpc.MethodNotFound {
		return true
	}
	msg := strings.ToLower(err.Error())
	return code == jsonrpc.InternalError && (strings.Contains(msg, "unknown method") || strings.Contains(msg, "method not found"))
}

func (s *Session) serveNode(ctx context.Context, c jsonrpc.Caller, addr string) error {
	ttl, err := s.register(ctx, c, addr)
	if err != nil {
		return fmt.Errorf("register at %s: %w", addr, err)
	}
	s.markRegistered(addr)
	local := isLocal(addr)
	heartbeat := local // until the registry says it has none
	for {
		interval := s.keepAliveInterval(ttl)
		if !local {
			interval = s.cfg.TTL / 2
		}
		if !s.sleep(ctx, interval) {
			if local {
				s.unregister(c, addr)
			}
			return ctx.Err()
		}
		var err error
		if heartbeat {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err = c.Call(cctx, "ipc.heartbeat", s.nameParams(), nil)
			cancel()
			switch code, _ := jsonrpc.ErrorCode(err); {
			case heartbeatUnsupported(err):
				// A registry without heartbeats (Songbird): keep the
				// registration by registering again, now and at every tick.
				s.cfg.Logger.Info("announce: the registry has no ipc.heartbeat; renewing by registering again", "node", addr, "err", err)
				heartbeat = false
				ttl, err = s.register(ctx, c, addr)
			case code == -32004 || code == -32003:
				// The node forgot us (restart without state, or expiry), or
				// the name is no longer ours: register afresh. The node
				// refuses (name_in_use) if another live host holds it.
				s.setToken("")
				ttl, err = s.register(ctx, c, addr)
			}
		} else {
			ttl, err = s.register(ctx, c, addr)
		}
		if err != nil && ctx.Err() != nil && local {
			s.unregister(c, addr) // stopped during the keep-alive call
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("keep-alive at %s: %w", addr, err)
		}
	}
}

// unregisterTimeout bounds the ipc.unregister of Close.
const unregisterTimeout = 2 * time.Second

func (s *Session) getToken() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.token
}

func (s *Session) setToken(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = tok
}

// nameParams names the registration for ipc.heartbeat and ipc.unregister.
func (s *Session) nameParams() map[string]any {
	p := map[string]any{"name": s.cfg.Name}
	if tok := s.getToken(); tok != "" {
		p["registration_token"] = tok
	}
	return p
}

// unregister withdraws the local registration, once the session is
// stopping: on the session's connection, or on a fresh one to addr when
// that one has broken (the node restarted since the last heartbeat).
func (s *Session) unregister(c jsonrpc.Caller, addr string) {
	ctx, cancel := context.WithTimeout(context.Background(), unregisterTimeout)
	defer cancel()
	err := c.Call(ctx, "ipc.unregister", s.nameParams(), nil)
	if _, isRPC := jsonrpc.ErrorCode(err); err != nil && !isRPC && ctx.Err() == nil {
		if fresh, derr := s.cfg.Dial(ctx, addr); derr == nil {
			err = fresh.Call(ctx, "ipc.unregister", s.nameParams(), nil)
			fresh.Close()
		}
	}
	if err != nil {
		s.cfg.Logger.Warn("announce: could not unregister; the node drops the registration at its TTL", "name", s.cfg.Name, "err", err)
		return
	}
	s.cfg.Logger.Info("announce: unregistered", "name", s.cfg.Name)
}

func tcpEndpoint(ep string) (descriptor.Endpoint, error) {
	scheme := "tcp"
	rest := ep
	if i := strings.Index(ep, "://"); i > 0 {
		scheme, rest = ep[:i], ep[i+3:]
	}
	rest = strings.TrimSuffix(rest, "/")
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return descriptor.Endpoint{}, fmt.Errorf("announce: endpoint %q must be tcp://host:port for a signed registration (a remote node cannot reach a Unix socket): serve on TCP as well", ep)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return descriptor.Endpoint{}, fmt.Errorf("announce: endpoint %q: bad port", ep)
	}
	return descriptor.Endpoint{Host: host, Port: p, Scheme: scheme}, nil
}

type jsonRaw []byte

func (r jsonRaw) MarshalJSON() ([]byte, error) { return r, nil }
