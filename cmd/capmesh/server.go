package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
)

// serverFlags are the options of `capmesh server`.
type serverFlags struct {
	name         string
	domain       string
	socket       string
	noSocket     bool
	port         int
	listen       string
	httpAddr     string
	maxMessage   int
	maxConns     int
	maxInFlight  int
	idleTimeout  time.Duration
	writeTimeout time.Duration
	drainTimeout time.Duration
}

func init() { register(newServerCmd) }

func newServerCmd(a *app) *cobra.Command {
	f := &serverFlags{}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a capmesh node on its Unix socket (and optionally TCP and HTTP)",
		Long: `Run a capmesh node. It listens for newline-delimited JSON-RPC 2.0 on its
Unix socket in the biomeos directory ($XDG_RUNTIME_DIR/biomeos/capmesh.sock,
or capmesh-$FAMILY_ID.sock when FAMILY_ID is set), with a capability-domain
symlink beside it; --port adds newline JSON-RPC on TCP and --http the
HTTP bridge (POST /jsonrpc). It starts standalone when no FAMILY_ID or
NODE_ID is set, and drains in-flight calls on SIGINT/SIGTERM.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServer(cmd.Context(), a, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "capmesh", "primal name: the socket is <name>.sock")
	fl.StringVar(&f.domain, "domain", "mesh", "capability domain: a <domain>.sock symlink points at the socket (empty: none)")
	fl.StringVar(&f.socket, "socket", "", "Unix socket path (default: the biomeos directory)")
	fl.BoolVar(&f.noSocket, "no-socket", false, "do not bind the Unix socket (requires --port or --http)")
	fl.IntVar(&f.port, "port", 0, "also serve newline JSON-RPC on this TCP port")
	fl.StringVar(&f.listen, "listen", "127.0.0.1", "address --port binds to")
	fl.StringVar(&f.httpAddr, "http", "", "also serve the HTTP bridge (POST /jsonrpc) on this address, e.g. 127.0.0.1:8080")
	fl.IntVar(&f.maxMessage, "max-message-bytes", 4<<20, "largest accepted message")
	fl.IntVar(&f.maxConns, "max-conns", 1024, "most concurrent connections")
	fl.IntVar(&f.maxInFlight, "max-in-flight", 64, "most calls in flight per connection")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", 5*time.Minute, "close connections idle this long")
	fl.DurationVar(&f.writeTimeout, "write-timeout", 10*time.Second, "disconnect peers that do not read their responses within this")
	fl.DurationVar(&f.drainTimeout, "drain-timeout", 10*time.Second, "how long shutdown waits for calls in flight")
	return cmd
}

// builtinMethods are the methods every capmesh process answers.
func builtinMethods(name, version string, started time.Time) jsonrpc.Map {
	liveness := jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return map[string]string{"status": "alive"}, nil
	})
	check := jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return map[string]any{
			"status":   "healthy",
			"primal":   name,
			"version":  version,
			"uptime_s": int64(time.Since(started).Seconds()),
		}, nil
	})
	return jsonrpc.Map{
		"health.liveness": liveness,
		"health.readiness": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
			return map[string]any{"status": "ready", "primal": name, "version": version}, nil
		}),
		"health.check": check,
		"health":       check,
		"ping":         liveness,
	}
}

func runServer(ctx context.Context, a *app, f *serverFlags) error {
	if f.noSocket && f.port == 0 && f.httpAddr == "" {
		return usageErrorf("--no-socket needs --port or --http, or there is nothing to listen on")
	}
	if f.port < 0 || f.port > 65535 {
		return usageErrorf("--port %d: want 1-65535", f.port)
	}
	if err := endpoint.ValidateName(f.name); err != nil {
		return usageErrorf("--name: %v", err)
	}
	if f.domain != "" {
		if err := endpoint.ValidateName(f.domain); err != nil {
			return usageErrorf("--domain: %v", err)
		}
	}
	log := a.log
	started := time.Now()
	methods := builtinMethods(f.name, versionString(), started)
	srv := jsonrpc.NewServer(methods, &jsonrpc.ServerOptions{
		MaxMessageBytes: f.maxMessage,
		MaxConns:        f.maxConns,
		MaxInFlight:     f.maxInFlight,
		IdleTimeout:     f.idleTimeout,
		WriteTimeout:    f.writeTimeout,
		DrainTimeout:    f.drainTimeout,
		Logger:          log,
	})

	if endpoint.FamilyID() == "" && os.Getenv("NODE_ID") == "" {
		log.Info("standalone mode: no FAMILY_ID or NODE_ID set")
	}

	var listeners []net.Listener
	closeAll := func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}
	if !f.noSocket {
		path := f.socket
		if path == "" {
			dir, fallback, err := endpoint.SocketDir()
			if err != nil {
				return withCode(exitUsage, err)
			}
			if fallback {
				log.Warn("XDG_RUNTIME_DIR is not set: using a private per-user socket directory that peers looking in the standard place will not find", "dir", dir)
			}
			path = filepath.Join(dir, endpoint.SocketName(f.name))
		}
		opts := &endpoint.UnixOptions{EnvName: f.name, Logger: log}
		if f.domain != "" && f.domain != f.name {
			opts.DomainLink = filepath.Join(filepath.Dir(path), endpoint.SocketName(f.domain))
		}
		ul, err := endpoint.ListenUnix(path, opts)
		if err != nil {
			return withCode(exitNetwork, err)
		}
		listeners = append(listeners, ul)
		log.Info("listening", "transport", "unix", "socket", ul.Path(), "domain_link", ul.DomainLink())
	}
	if f.port != 0 {
		tl, err := endpoint.ListenTCP(net.JoinHostPort(f.listen, fmt.Sprint(f.port)))
		if err != nil {
			closeAll()
			return withCode(exitNetwork, err)
		}
		listeners = append(listeners, tl)
		log.Info("listening", "transport", "tcp", "addr", tl.Addr().String())
	}
	var hs *http.Server
	var hl net.Listener
	if f.httpAddr != "" {
		var err error
		hl, err = net.Listen("tcp", f.httpAddr)
		if err != nil {
			closeAll()
			return withCode(exitNetwork, fmt.Errorf("listen http %s: %w", f.httpAddr, err))
		}
		mux := http.NewServeMux()
		mux.Handle("/jsonrpc", srv.HTTPHandler())
		hs = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: f.idleTimeout}
		log.Info("listening", "transport", "http", "addr", hl.Addr().String(), "path", "/jsonrpc")
	}

	errc := make(chan error, len(listeners)+1)
	for _, l := range listeners {
		go func() { errc <- srv.Serve(ctx, l) }()
	}
	if hs != nil {
		go func() { errc <- hs.Serve(hl) }()
	}
	log.Info("capmesh node ready", "name", f.name, "version", versionString())

	var firstErr error
	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, jsonrpc.ErrServerClosed) && !errors.Is(err, http.ErrServerClosed) {
			firstErr = err
		}
	}
	log.Info("shutting down: draining calls in flight", "timeout", f.drainTimeout)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.drainTimeout)
	defer cancel()
	if hs != nil {
		_ = hs.Shutdown(dctx)
	}
	if err := srv.Shutdown(dctx); err != nil {
		log.Warn("drain incomplete", "err", err)
	}
	closeAll()
	if firstErr != nil {
		return withCode(exitNetwork, firstErr)
	}
	return ctx.Err()
}
