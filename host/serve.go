package host

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/capmesh/capmesh/btsp"
	"github.com/capmesh/capmesh/chp/chphttp"
	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/jsonrpc/jhttp"
	"github.com/capmesh/capmesh/registry/announce"
	"github.com/capmesh/capmesh/wire"
)

// Serve binds the host's listeners — its Unix socket in the biomeos
// directory with the capability-domain symlink, and TCP and HTTP when
// configured — announces the host to a node when one is reachable, and
// answers calls until ctx ends or a health.drain completes. Then it drains:
// new work is refused with -32000 "Service draining", the calls in flight
// get up to DrainTimeout to finish, the listeners close and the socket and
// symlink are removed. It returns nil after a graceful stop, or the error
// that prevented or ended serving.
func (h *Host) Serve(ctx context.Context) error {
	if err := h.markServed(); err != nil {
		return err
	}
	defer h.Close()
	if err := h.checkDependencies(); err != nil {
		return err
	}
	if endpoint.FamilyID() == "" && os.Getenv("NODE_ID") == "" {
		h.log.Info("standalone mode: no FAMILY_ID or NODE_ID set")
	}
	s, err := h.start()
	if err != nil {
		return err
	}
	// The servers outlive ctx: when it ends they drain, then stop.
	sctx := context.WithoutCancel(ctx)
	errc := s.serve(sctx)
	var sess *announce.Session
	if !h.cfg.NoAnnounce {
		sess = announce.Start(sctx, h.announceConfig())
	}
	h.accepting.Store(true)
	close(h.ready)
	h.log.Info("host ready", "name", h.info.Name, "version", h.info.Version, "methods", len(h.tab.Load().envelope.Methods), "transport", strings.Join(s.ls.transports, ","))

	var failure error
	select {
	case <-ctx.Done():
	case <-h.stop:
	case err := <-errc:
		if !errors.Is(err, jsonrpc.ErrServerClosed) && !errors.Is(err, http.ErrServerClosed) {
			failure = err
		}
	}
	h.shutdown(ctx, s, sess)
	return failure
}

// markServed records that Serve runs, which it may do once and not after
// Close.
func (h *Host) markServed() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.served || h.closed {
		return errors.New("host: Serve called twice, or after Close")
	}
	h.served, h.serving = true, true
	return nil
}

// servers are what Serve runs: the bound listeners, the JSON-RPC server
// on the stream listeners and the HTTP server (nil: none) on the HTTP one.
type servers struct {
	ls  *listeners
	srv *jsonrpc.Server
	hs  *http.Server
}

// start binds the listeners, publishes the envelope with the transports
// actually bound, and builds the servers (not yet serving).
func (h *Host) start() (*servers, error) {
	ls, err := h.listen()
	if err != nil {
		return nil, err
	}
	s := &servers{ls: ls}
	h.mu.Lock()
	h.bound = ls.transports
	t, err := h.buildLocked()
	if err == nil {
		h.tab.Store(t)
	}
	h.mu.Unlock()
	if err != nil {
		s.closeListeners()
		return nil, err
	}
	opts := h.cfg.RPC
	opts.Logger = h.log
	if h.btspEnforced() {
		h.log.Info("BTSP required on the stream listeners: cleartext serves discovery and health only (TS-01)", "family", h.btsp.FamilyID)
	}
	s.srv = jsonrpc.NewServer(h, &opts)
	if ls.http != nil {
		mux, err := h.httpMux(s.srv)
		if err != nil {
			s.closeListeners()
			return nil, err
		}
		// The jsonrpc server's budget and deadlines: HTTP connections
		// count against MaxConns and cannot take the owner's reserve.
		s.hs = jhttp.NewServer(s.srv, mux)
	}
	return s, nil
}

// serve starts serving every listener, each in its own goroutine, and
// returns the channel on which each reports why it stopped.
func (s *servers) serve(ctx context.Context) <-chan error {
	errc := make(chan error, len(s.ls.stream)+1)
	for _, l := range s.ls.stream {
		go func() { errc <- s.srv.Serve(ctx, l) }()
	}
	if s.hs != nil {
		go func() { errc <- s.hs.Serve(jhttp.Listener(s.srv, s.ls.http)) }()
	}
	return errc
}

// closeListeners closes every listener.
func (s *servers) closeListeners() {
	for _, l := range s.ls.stream {
		_ = l.Close()
	}
	if s.ls.http != nil {
		_ = s.ls.http.Close()
	}
}

// shutdown drains: it refuses new work and lets the calls in flight
// finish (for up to DrainTimeout), then stops the servers and closes the
// listeners. The node stops listing the host first (the announcement
// unregisters), so that no new call is routed to a host that is going
// away.
func (h *Host) shutdown(ctx context.Context, s *servers, sess *announce.Session) {
	_, inflight := h.drain.start()
	h.accepting.Store(false)
	if sess != nil {
		_ = sess.Close()
	}
	h.log.Info("shutting down: draining calls in flight", "in_flight", inflight, "timeout", h.cfg.DrainTimeout)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.DrainTimeout)
	defer cancel()
	if err := h.drain.wait(dctx); err != nil {
		h.log.Warn("drain timeout reached with calls still in flight")
	}
	if s.hs != nil {
		_ = s.hs.Shutdown(dctx)
	}
	if err := s.srv.Shutdown(dctx); err != nil {
		h.log.Warn("drain incomplete", "err", err)
	}
	s.closeListeners()
	h.mu.Lock()
	h.serving = false
	h.mu.Unlock()
}

// listeners are what Serve bound.
type listeners struct {
	stream     []net.Listener
	http       net.Listener
	transports []string // wire names, in the standard's order: uds, tcp, http
}

// secure wraps a stream listener in BTSP when the host speaks it: each
// connection's handshake then runs in its own goroutine, in the JSON-RPC
// server, before its first message.
func (h *Host) secure(l net.Listener) net.Listener {
	if h.btsp == nil {
		return l
	}
	return btsp.Listener(l, h.btsp)
}

func (h *Host) listen() (*listeners, error) {
	ls := &listeners{}
	fail := func(err error) (*listeners, error) {
		for _, l := range ls.stream {
			_ = l.Close()
		}
		return nil, err
	}
	if !h.cfg.NoSocket {
		path := h.cfg.Socket
		if path == "" {
			dir, fallback, err := endpoint.SocketDir()
			if err != nil {
				return fail(fmt.Errorf("host: socket directory: %w", err))
			}
			if fallback {
				h.log.Warn("XDG_RUNTIME_DIR is not set: using a private per-user socket directory that peers looking in the standard place will not find", "dir", dir)
			}
			path = filepath.Join(dir, endpoint.SocketName(h.info.Name))
		}
		uo := &endpoint.UnixOptions{EnvName: h.info.Name, Logger: h.log}
		if d := h.info.Domain; d != "" && d != h.info.Name && !h.cfg.NoDomainLink {
			uo.DomainLink = filepath.Join(filepath.Dir(path), endpoint.SocketName(d))
		}
		ul, err := endpoint.ListenUnix(path, uo)
		if err != nil {
			return fail(fmt.Errorf("host: %w", err))
		}
		ls.stream = append(ls.stream, h.secure(ul))
		ls.transports = append(ls.transports, wire.TransportUDS)
		h.addrs.Store("unix", ul.Path())
		h.log.Info("listening", "transport", "unix", "socket", ul.Path(), "domain_link", ul.DomainLink())
	}
	if h.cfg.TCP != "" {
		tl, err := endpoint.ListenTCP(h.cfg.TCP)
		if err != nil {
			return fail(fmt.Errorf("host: %w", err))
		}
		if err := h.checkExposure("tcp", h.cfg.TCP, tl.Addr()); err != nil {
			_ = tl.Close()
			return fail(err)
		}
		ls.stream = append(ls.stream, h.secure(tl))
		ls.transports = append(ls.transports, wire.TransportTCP)
		h.addrs.Store("tcp", tl.Addr().String())
		h.log.Info("listening", "transport", "tcp", "addr", tl.Addr().String())
	}
	if h.cfg.HTTP != "" {
		hl, err := net.Listen("tcp", h.cfg.HTTP)
		if err != nil {
			return fail(fmt.Errorf("host: listen http %s: %w", h.cfg.HTTP, err))
		}
		if err := h.checkExposure("http", h.cfg.HTTP, hl.Addr()); err != nil {
			_ = hl.Close()
			return fail(err)
		}
		if h.btsp != nil && !h.acc.Keyed() && !h.cfg.InsecureListen {
			// The stream listeners demand the family seed; cleartext HTTP
			// without keys would be a door around it.
			_ = hl.Close()
			return fail(fmt.Errorf("host: refusing to serve http on %s: %w: this family host requires BTSP, which HTTP does not speak; "+
				"configure keys (CHP_HOST_API_KEY, CHP_HOST_API_KEYS) to guard it, or set Config.InsecureListen (capmesh server --insecure-listen)", h.cfg.HTTP, ErrInsecureListen))
		}
		ls.http = hl
		ls.transports = append(ls.transports, wire.TransportHTTP)
		h.addrs.Store("http", hl.Addr().String())
		h.log.Info("listening", "transport", "http", "addr", hl.Addr().String(), "jsonrpc", "/jsonrpc")
	}
	return ls, nil
}

// checkExposure refuses, loudly, a listener bound beyond loopback on a
// host without keys, unless Config.InsecureListen says to serve anyway
// (then it warns).
func (h *Host) checkExposure(transport, configured string, a net.Addr) error {
	if h.acc.Keyed() || isLoopback(a) {
		return nil
	}
	if h.cfg.InsecureListen {
		h.log.Warn("INSECURE: serving beyond loopback without credentials; anyone who can reach this address may invoke every capability and read its evidence",
			"transport", transport, "addr", configured)
		return nil
	}
	return fmt.Errorf("host: refusing to serve %s on %s: %w: anyone who can reach it could invoke every capability; "+
		"configure keys (CHP_HOST_API_KEY, CHP_HOST_API_KEYS), bind a loopback address, or set Config.InsecureListen (capmesh server --insecure-listen) to serve it anyway", transport, configured, ErrInsecureListen)
}

// ErrInsecureListen is what Serve's refusal to bind beyond loopback
// without keys wraps.
var ErrInsecureListen = errors.New("reachable beyond loopback and the host has no keys")

// isLoopback reports whether a is bound to a loopback address only (not
// the unspecified address, which is every interface).
func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// httpMux serves the JSON-RPC bridge at /jsonrpc, the mounted handlers,
// and the CHP HTTP binding on every other path.
func (h *Host) httpMux(srv *jsonrpc.Server) (*http.ServeMux, error) {
	mux := http.NewServeMux()
	// The bridge passes the access layer like every other binding: a wrong
	// X-CHP-Key is a 401 here, a missing one an anonymous caller.
	mux.Handle("/jsonrpc", h.acc.HTTP(jhttp.Handler(srv)))
	h.mu.Lock()
	mounts := slices.Clone(h.https)
	h.mu.Unlock()
	for _, m := range mounts {
		if m.keyed {
			mux.Handle(m.pattern, h.acc.RequireKey(m.h))
			continue
		}
		mux.Handle(m.pattern, m.h)
	}
	mux.Handle("/", chphttp.Handler(h.b, h.cfg.CHPHTTP))
	return mux, nil
}

// announceConfig registers the host under its name with its capability
// tags: each capability's method and its domain, as routers look up both.
func (h *Host) announceConfig() announce.Config {
	h.mu.Lock()
	tags := map[string]bool{}
	for name := range h.caps {
		tags[name] = true
		if d, _, ok := strings.Cut(name, "."); ok {
			tags[d] = true
		}
	}
	h.mu.Unlock()
	ep := ""
	if p := h.Addr("unix"); p != "" {
		ep = "unix://" + p
	} else if a := h.Addr("tcp"); a != "" {
		ep = "tcp://" + a
	} else {
		ep = "http://" + h.Addr("http") + "/jsonrpc"
	}
	signed := "" // what a signed registration (TCP/HTTP node) announces
	if a := h.Addr("tcp"); a != "" {
		signed = "tcp://" + a
	}
	return announce.Config{
		Name:           h.info.Name,
		Capabilities:   slices.Sorted(maps.Keys(tags)),
		Endpoint:       ep,
		SignedEndpoint: signed,
		Version:        h.info.Version,
		Node:           h.cfg.Node,
		Key:            h.key,
		Network:        h.cfg.Network,
		Logger:         h.log,
	}
}
