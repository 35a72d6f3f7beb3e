// Package announce is the host side of registration: it finds a capmesh
// node (or any ecoPrimals-compatible registry), registers the host's
// capabilities, keeps the registration alive, re-registers after the node
// restarts, and stays quiet — one warning, not a stream — while no node is
// reachable, so a host always starts and serves standalone.
//
// Flow: Start → locate the node (Config.Node, else $DISCOVERY_SOCKET, else
// capmesh.sock or songbird.sock in the biomeos socket directory) → over a
// local Unix socket, unsigned ipc.register {name, capabilities, endpoint}
// then ipc.heartbeat every Interval, both carrying the registration token
// the node returned; over TCP/HTTP, a signed RFC-005 descriptor
// (ipc.register {"descriptor": …}) refreshed at half its TTL → on any
// failure, reconnect with backoff and register again → on Close, a local
// registration is withdrawn (ipc.unregister with its token), so the node
// stops listing the host at once instead of at the end of its TTL.
//
// The package depends only on jsonrpc and registry/descriptor, so the host
// library can import it without pulling in SQLite or an HTTP server.
package announce

import (
	"context"
	"crypto/ed25519"
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
	// Interval between heartbeats of a local registration. Default 30 s
	// (the node's default TTL is 90 s).
	Interval time.Duration
	// MaxBackoff caps the reconnect delay. Default 30 s.
	MaxBackoff time.Duration
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Dial connects to the node. Default: jsonrpc.Dial / NewHTTPClient.
	Dial func(ctx context.Context, addr string) (jsonrpc.Caller, error)
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
	var out []string
	for _, name := range []string{"capmesh", "songbird"} {
		p := filepath.Join(dir, name+".sock")
		if fam := os.Getenv("FAMILY_ID"); fam != "" && fam != "default" {
			out = append(out, filepath.Join(dir, name+"-"+fam+".sock"))
		}
		out = append(out, p)
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

func (s *Session) run(ctx context.Context) {
	defer close(s.done)
	backoff := 500 * time.Millisecond
	warned := false
	for ctx.Err() == nil {
		err := s.session(ctx)
		s.set(false, "")
		if ctx.Err() != nil {
			return
		}
		if !warned {
			s.cfg.Logger.Warn("announce: not registered with a node; serving standalone and retrying quietly", "name", s.cfg.Name, "err", err)
			warned = true
		} else {
			s.cfg.Logger.Debug("announce: retry failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff *= 2; backoff > s.cfg.MaxBackoff {
			backoff = s.cfg.MaxBackoff
		}
	}
}

// session connects, registers and keeps the registration alive until an
// error; it resets the warning state once registered.
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

func (s *Session) register(ctx context.Context, c jsonrpc.Caller, addr string) error {
	var params map[string]any
	if isLocal(addr) {
		params = map[string]any{"primal_id": s.cfg.Name, "name": s.cfg.Name, "capabilities": s.cfg.Capabilities, "endpoint": s.cfg.Endpoint, "version": s.cfg.Version}
		if tok := s.getToken(); tok != "" {
			params["registration_token"] = tok
		}
	} else {
		if s.cfg.Key == nil {
			return fmt.Errorf("announce: node %s is not local and no signing key is configured", addr)
		}
		ep, err := tcpEndpoint(s.cfg.Endpoint)
		if err != nil {
			return err
		}
		d := descriptor.New(s.cfg.Name, s.cfg.Network, s.cfg.Key.Public().(ed25519.PublicKey), s.cfg.Capabilities, ep, time.Now(), s.cfg.TTL)
		if err := d.Sign(s.cfg.Key); err != nil {
			return err
		}
		raw, _ := d.MarshalJSON()
		params = map[string]any{"descriptor": jsonRaw(raw)}
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var res struct {
		Token string `json:"registration_token"`
	}
	if err := c.Call(cctx, "ipc.register", params, &res); err != nil {
		return err
	}
	if isLocal(addr) {
		s.setToken(res.Token)
	}
	return nil
}

func (s *Session) serveNode(ctx context.Context, c jsonrpc.Caller, addr string) error {
	if err := s.register(ctx, c, addr); err != nil {
		return fmt.Errorf("register at %s: %w", addr, err)
	}
	s.cfg.Logger.Info("announce: registered", "name", s.cfg.Name, "node", addr, "capabilities", s.cfg.Capabilities)
	s.set(true, addr)
	interval := s.cfg.Interval
	if !isLocal(addr) {
		interval = s.cfg.TTL / 2
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if isLocal(addr) {
				s.unregister(c, addr)
			}
			return ctx.Err()
		case <-t.C:
		}
		var err error
		if isLocal(addr) {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err = c.Call(cctx, "ipc.heartbeat", s.nameParams(), nil)
			cancel()
			if code, ok := jsonrpc.ErrorCode(err); ok && (code == -32004 || code == -32003) {
				// The node forgot us (restart without state, or expiry), or
				// the name is no longer ours: register afresh. The node
				// refuses (name_in_use) if another live host holds it.
				s.setToken("")
				err = s.register(ctx, c, addr)
			}
		} else {
			err = s.register(ctx, c, addr)
		}
		if err != nil && ctx.Err() != nil && isLocal(addr) {
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
		return descriptor.Endpoint{}, fmt.Errorf("announce: endpoint %q must be tcp://host:port for a signed registration", ep)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return descriptor.Endpoint{}, fmt.Errorf("announce: endpoint %q: bad port", ep)
	}
	return descriptor.Endpoint{Host: host, Port: p, Scheme: scheme}, nil
}

type jsonRaw []byte

func (r jsonRaw) MarshalJSON() ([]byte, error) { return r, nil }
