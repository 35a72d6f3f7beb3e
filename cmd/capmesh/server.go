package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/endpoint"
	_ "github.com/capmesh/capmesh/evidence/postgres" // postgres:// for --evidence
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/identity"
	"github.com/capmesh/capmesh/internal/xdg"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/sqlite"
	"github.com/capmesh/capmesh/wire"
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
	ownerReserve int
	maxBatch     int
	maxReply     int
	lineTimeout  time.Duration
	headerTime   time.Duration
	maxInFlight  int
	idleTimeout  time.Duration
	writeTimeout time.Duration
	drainTimeout time.Duration

	network      string
	operatorKeys []string
	trustKeys    []string
	rootKey      string
	localTTL     time.Duration
	memory       bool
	evidence     string
	requireBTSP  bool
	chpFixtures  bool
	rateLimits   map[string]int
}

func init() { register(newServerCmd) }

func newServerCmd(a *app) *cobra.Command {
	f := &serverFlags{}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a capmesh node: the registry and router, as a Level 3 host",
		Long: `Run a capmesh node. It listens for newline-delimited JSON-RPC 2.0 on its
Unix socket in the biomeos directory ($XDG_RUNTIME_DIR/biomeos/capmesh.sock,
or capmesh-$FAMILY_ID.sock when FAMILY_ID is set), with a capability-domain
symlink beside it (mesh.sock); --port adds newline JSON-RPC on TCP and --http
an HTTP listener with the JSON-RPC bridge (POST /jsonrpc), the CHP HTTP
binding (/host, /invoke, /replay/{id}, …) and the Genesis-Mesh registry
routes (/agents, /crl, /join, /genesis, …).

The node is a capability host like any other: capabilities.list answers the
full Level 3 envelope, signed with the node's key, plus identity.get, the
health triad, health.drain and the CHP methods. It adds the registry
(ipc.register, ipc.resolve, ipc.find_capability, ipc.list, ipc.heartbeat,
…), capability.call and capability.discover, and routes any other
domain.operation call to a live, trusted provider.

State lives in the state directory (--data-dir, default
$XDG_STATE_HOME/capmesh): the node key (keys/identity.pem, the one
'capmesh keys' manages), the genesis root key (keys/root.pem, or
--root-key; GET /genesis publishes it as root_public_key and the registry's
network-authority key as network_authority), the registry (registry.db) and the evidence log
(evidence/<name>/). --memory keeps everything in memory instead;
--evidence postgres://… keeps the evidence in PostgreSQL, where many nodes
and hosts may append to one database.

It starts standalone when no FAMILY_ID or NODE_ID is set, and drains
in-flight calls on SIGINT/SIGTERM or health.drain.`,
		Example: `  capmesh server
  capmesh server --port 9000 --http 127.0.0.1:8080
  capmesh server --memory --trust-key 8AARks4noJtut6Cdhly0z4Wjj9MkHMYeIRZVFEHrsSg=`,
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
	fl.StringVar(&f.httpAddr, "http", "", "also serve HTTP on this address (JSON-RPC at /jsonrpc, the CHP binding, the registry routes), e.g. 127.0.0.1:8080")
	fl.IntVar(&f.maxMessage, "max-message-bytes", 4<<20, "largest accepted message")
	fl.IntVar(&f.maxConns, "max-conns", 1024, "most concurrent connections")
	fl.IntVar(&f.ownerReserve, "owner-reserve", 64, "connections of --max-conns kept for the node's own user on its Unix socket")
	fl.IntVar(&f.maxBatch, "max-batch", 1024, "most elements of a batch")
	fl.IntVar(&f.maxReply, "max-reply-bytes", 16<<20, "most reply bytes a connection may have waiting to be written")
	fl.DurationVar(&f.lineTimeout, "line-timeout", 30*time.Second, "time to complete a message (or an HTTP body) once it began")
	fl.DurationVar(&f.headerTime, "header-timeout", 10*time.Second, "time to send an HTTP request's headers")
	fl.IntVar(&f.maxInFlight, "max-in-flight", 64, "most calls in flight per connection")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", 5*time.Minute, "close connections idle this long")
	fl.DurationVar(&f.writeTimeout, "write-timeout", 10*time.Second, "disconnect peers that do not read their responses within this")
	fl.DurationVar(&f.drainTimeout, "drain-timeout", 10*time.Second, "how long shutdown waits for calls in flight")
	fl.StringVar(&f.network, "network", "capmesh", "network name signed descriptors must carry")
	fl.StringArrayVar(&f.operatorKeys, "operator-key", nil, "operator key allowed to call /admin/* as ID=PUBLIC-KEY (base64 or hex; repeatable)")
	fl.StringArrayVar(&f.trustKeys, "trust-key", nil, "node public key (base64 or hex) trusted without a join certificate (repeatable)")
	fl.StringVar(&f.rootKey, "root-key", "", "key file of the root key that signs the genesis block (default: keys/root.pem beside the node key, created on first start; never the network-authority key)")
	fl.DurationVar(&f.localTTL, "local-ttl", 90*time.Second, "lifetime of an unsigned local registration, renewed by ipc.heartbeat")
	fl.BoolVar(&f.memory, "memory", false, "keep the key, the registry and the evidence in memory (nothing is written)")
	fl.StringVar(&f.evidence, "evidence", "", "keep CHP evidence in this PostgreSQL database (postgres://user@host/db), which many nodes and hosts may share; wins over --memory for the evidence")
	fl.BoolVar(&f.chpFixtures, "chp-fixtures", false, "also host the CHP conformance fixture capabilities (upstream conformance/FIXTURES.md) so the upstream runner can be pointed at --http")
	fl.StringToIntVar(&f.rateLimits, "http-rate-limit", nil, "per-client-IP limits a minute of the HTTP registry writes, as agents=N (POST/DELETE /agents), join=N (/join, /renew, /heartbeat), admin=N (/admin/*); 0 is no limit (default 30 each)")
	fl.BoolVar(&f.requireBTSP, "require-btsp", false, "on a family-scoped socket, refuse plaintext JSON-RPC with the BTSP-required error (TS-01)")
	return cmd
}

func (f *serverFlags) validate() error {
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
	if f.localTTL <= 0 {
		return usageErrorf("--local-ttl %s: want a positive duration", f.localTTL)
	}
	if strings.TrimSpace(f.network) == "" {
		return usageErrorf("--network: want a network name")
	}
	return nil
}

// registryConfig turns the trust flags into the registry's configuration.
func (f *serverFlags) registryConfig() (registry.Config, error) {
	cfg := registry.Config{Network: f.network, LocalTTL: f.localTTL}
	var err error
	if cfg.RateLimits, err = rateLimits(f.rateLimits); err != nil {
		return cfg, err
	}
	for _, s := range f.operatorKeys {
		id, key, ok := strings.Cut(s, "=")
		if !ok || id == "" {
			return cfg, usageErrorf("--operator-key %q: want ID=PUBLIC-KEY", s)
		}
		pub, err := identity.ParsePublicKeyString(key)
		if err != nil {
			return cfg, usageErrorf("--operator-key %s: %v", id, err)
		}
		if cfg.OperatorKeys == nil {
			cfg.OperatorKeys = map[string]ed25519.PublicKey{}
		}
		cfg.OperatorKeys[id] = pub.Bytes()
	}
	for _, s := range f.trustKeys {
		pub, err := identity.ParsePublicKeyString(s)
		if err != nil {
			return cfg, usageErrorf("--trust-key %q: %v", s, err)
		}
		cfg.TrustedKeys = append(cfg.TrustedKeys, pub.Base64())
	}
	return cfg, nil
}

func runServer(ctx context.Context, a *app, f *serverFlags) error {
	if err := f.validate(); err != nil {
		return err
	}
	rcfg, err := f.registryConfig()
	if err != nil {
		return err
	}
	log := a.log
	rcfg.Logger = log

	hcfg := &host.Config{
		Socket:       f.socket,
		NoSocket:     f.noSocket,
		HTTP:         f.httpAddr,
		DataDir:      a.dataDir,
		Ephemeral:    f.memory,
		EvidenceURL:  f.evidence,
		RequireBTSP:  f.requireBTSP,
		NoAnnounce:   true, // the node is what others announce to
		DrainTimeout: f.drainTimeout,
		Logger:       log,
		RPC: jsonrpc.ServerOptions{
			MaxMessageBytes: f.maxMessage,
			MaxConns:        f.maxConns,
			MaxInFlight:     f.maxInFlight,
			IdleTimeout:     f.idleTimeout,
			WriteTimeout:    f.writeTimeout,
			OwnerReserve:    f.ownerReserve,
			MaxBatch:        f.maxBatch,
			MaxReplyBytes:   f.maxReply,
			LineTimeout:     f.lineTimeout,
			HeaderTimeout:   f.headerTime,
		},
	}
	if f.domain == "" {
		hcfg.NoDomainLink = true
	}
	if f.chpFixtures {
		// The fixture profile's governance: a medium risk ceiling (so the
		// high-risk fixture is denied) and the rule-based safety evaluator.
		hcfg.CHP.Policy = boundary.FixturePolicy()
		hcfg.CHP.Safety = boundary.FixtureSafety()
	}
	if f.port != 0 {
		hcfg.TCP = net.JoinHostPort(f.listen, fmt.Sprint(f.port))
	}
	if f.rootKey != "" {
		root, err := identity.Load(f.rootKey)
		if err != nil {
			return withCode(exitUsage, fmt.Errorf("--root-key: %w", err))
		}
		rcfg.RootKey = root.Ed25519()
	}
	if !f.memory {
		// The node signs with the user's capmesh key, the one `capmesh keys`
		// shows, and keeps its registry in SQLite beside it.
		keyPath, err := identity.DefaultKeyPath(a.dataDir)
		if err != nil {
			return withCode(exitUsage, err)
		}
		hcfg.KeyFile = keyPath
		if f.rootKey == "" {
			// The genesis root key lives beside the node key, separate from
			// the network-authority key (RFC-001 rule 8).
			root, created, err := identity.LoadOrCreate(filepath.Join(filepath.Dir(keyPath), "root.pem"))
			if err != nil {
				return fmt.Errorf("root key: %w", err)
			}
			if created {
				log.Info("generated the genesis root key", "key_id", root.Public().KeyID())
			}
			rcfg.RootKey = root.Ed25519()
		}
		dir, err := xdg.StateDir(a.dataDir)
		if err != nil {
			return withCode(exitUsage, err)
		}
		store, err := sqlite.Open(filepath.Join(dir, "registry.db"))
		if err != nil {
			return fmt.Errorf("registry store: %w", err)
		}
		defer store.Close()
		rcfg.Store = store
	}

	node, err := registry.NewNode(rcfg)
	if err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	defer node.Close()
	// Close the node as soon as shutdown begins, not after the drain: an
	// open `registry watch` long-poll would otherwise hold the drain for its
	// full timeout. Calls still in flight get a clear "node closed" error.
	stopNode := context.AfterFunc(ctx, func() { _ = node.Close() })
	defer stopNode()

	h, err := host.New(host.Info{
		Name:        f.name,
		Version:     versionString(),
		Domain:      f.domain,
		Description: "capmesh node: registry, discovery and routing",
	}, hcfg)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		// The evidence log is locked: another node runs on this state.
		return withCode(exitFailure, fmt.Errorf("another capmesh server is running with this state directory: %w", err))
	}
	if err != nil {
		return withCode(exitUsage, err)
	}
	if f.chpFixtures {
		if err := boundary.RegisterFixtures(h.Boundary()); err != nil {
			_ = h.Close()
			return fmt.Errorf("chp fixtures: %w", err)
		}
		log.Info("CHP conformance fixtures registered", "http", f.httpAddr)
	}
	if err := h.Mount(node.RPC()); err != nil {
		_ = h.Close()
		return err
	}
	// What the registry's methods cost and need, for planners reading the
	// node's capabilities.list: routing is a network hop; a heartbeat or
	// an unregistration presupposes a registration.
	local := wire.CostEstimate{CPU: wire.CostLow, LatencyMS: 0.1}
	for _, a := range []struct {
		method string
		opts   []host.CapOption
	}{
		{"capability.call", []host.CapOption{host.Cost(wire.CostEstimate{CPU: wire.CostLow, LatencyMS: 5})}},
		{"ipc.register", []host.CapOption{host.Cost(wire.CostEstimate{CPU: wire.CostLow, LatencyMS: 2})}},
		{"ipc.heartbeat", []host.CapOption{host.Cost(local), host.Requires("ipc.register")}},
		{"ipc.unregister", []host.CapOption{host.Cost(local), host.Requires("ipc.register")}},
		{"ipc.find_capability", []host.CapOption{host.Cost(local)}},
		{"ipc.resolve", []host.CapOption{host.Cost(local)}},
	} {
		if err := h.Annotate(a.method, a.opts...); err != nil {
			log.Debug("registry method not annotated", "method", a.method, "err", err)
		}
	}
	if f.httpAddr != "" {
		// The Genesis-Mesh Network-Authority routes; the registry's own GET
		// /health is left to the CHP binding, which owns /health on every
		// capmesh host.
		rh := node.HTTPHandler()
		for _, p := range registry.HTTPRoutes() {
			if err := h.MountHTTP(p, rh); err != nil {
				_ = h.Close()
				return err
			}
		}
	}
	declareSelf(ctx, node, h, f, hcfg, log)
	log.Info("capmesh node starting", "name", f.name, "version", versionString(), "network", f.network, "memory", f.memory)
	if err := h.Serve(ctx); err != nil {
		if isAddrError(err) {
			return withCode(exitUsage, err) // a malformed --http or --listen value
		}
		if errors.Is(err, endpoint.ErrSocketInUse) || isListenError(err) {
			return withCode(exitFailure, err) // cannot bind: a failure, not "unreachable"
		}
		return err
	}
	return ctx.Err()
}

// isAddrError reports whether err is a listen address that cannot be
// parsed or resolved (missing or unknown port, unknown host): a usage error.
func isAddrError(err error) bool {
	var ae *net.AddrError
	var de *net.DNSError
	return errors.As(err, &ae) || errors.As(err, &de)
}

// isListenError reports whether err is a failure to bind a listener.
func isListenError(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "listen"
}
