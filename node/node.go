// Package node assembles a whole capmesh node from a Config: the host
// (its listeners, Level 3 surface, CHP boundary and evidence store), the
// registry with its durable store and keys, the router, the Genesis-Mesh
// HTTP routes, and the loop protection that tells the registry which
// endpoints are the node's own. `capmesh server` maps its flags to a
// Config and calls Start; tests start whole nodes in process the same way,
// as etcd's embed and nats' RunServer do.
//
//	cfg := node.Config{Memory: true, Socket: "/tmp/n/capmesh.sock"}
//	n, err := node.Start(ctx, cfg)      // returns once every listener is bound
//	…  n.Addr("unix"), n.Registry(), n.Host()
//	err = n.Stop(ctx)                   // drains calls in flight, then closes
//
// Data flow: listeners (endpoint) → jsonrpc.Server → host: built-in
// methods, the registry's ipc.* and capability.* methods (mounted), CHP;
// any other domain.op → the registry's router → a live, trusted provider.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/capmesh/capmesh/registry/api"

	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/chphttp"
	"github.com/capmesh/capmesh/chp/gateway"
	"github.com/capmesh/capmesh/dashboard"
	"github.com/capmesh/capmesh/evidence/logstore"
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/identity"
	"github.com/capmesh/capmesh/internal/xdg"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/sqlite"
	"github.com/capmesh/capmesh/telemetry"
	"github.com/capmesh/capmesh/tracing"
	"github.com/capmesh/capmesh/wire"
)

// Config describes a node. The zero value (plus a Version) is the
// embedded default: the Unix socket in the biomeos directory, state under
// $XDG_STATE_HOME/capmesh.
type Config struct {
	// Name is the node's primal name; its socket is <Name>.sock (or
	// <Name>-<FAMILY_ID>.sock). Default "capmesh".
	Name string
	// Domain names the capability-domain symlink beside the socket
	// (<Domain>.sock). Default "mesh"; NoDomainLink drops it.
	Domain       string
	NoDomainLink bool
	// Version is what identity.get and capabilities.list report.
	// Default "0.0.0-dev".
	Version string

	// Socket is the Unix socket path (default: the biomeos directory);
	// NoSocket binds none (then TCP or HTTP is required).
	Socket   string
	NoSocket bool
	// TCP serves newline JSON-RPC on this host:port; HTTP serves the
	// JSON-RPC bridge, the CHP binding and the registry's HTTP routes.
	TCP  string
	HTTP string

	// DataDir is the state directory (default $XDG_STATE_HOME/capmesh):
	// keys/identity.pem (the node key), keys/root.pem (the genesis root
	// key), registry.db and the evidence log. Memory keeps all of it in
	// memory instead.
	DataDir string
	Memory  bool
	// EvidenceURL keeps the CHP evidence in the database it names instead
	// (host.Config.EvidenceURL: postgres://…, which many nodes and hosts
	// may share), Memory or not; the program imports the engine
	// (evidence/postgres).
	EvidenceURL string
	// RegistryURL keeps the registry in the shared store it names instead
	// of registry.db (registry.OpenStoreURL: etcd://host:2379[,host:2379…]
	// [/prefix], which many nodes share), Memory or not; the program
	// imports the engine (registry/etcd). The genesis root key and the
	// network-authority key then live in that store too, shared by the
	// fleet, unless RootKeyFile names one.
	RegistryURL string
	// RootKeyFile is the genesis root key's file; default keys/root.pem
	// beside the node key, created on first start.
	RootKeyFile string

	// Registry configures the registry (network, trust, operator keys,
	// TTLs, rate limits). Start fills Store, RootKey and Logger unless they
	// are set.
	Registry registry.Config

	// RPC tunes the JSON-RPC server (limits, deadlines).
	RPC jsonrpc.ServerOptions
	// DrainTimeout bounds how long Stop waits for calls in flight.
	// Default 10 s.
	DrainTimeout time.Duration
	// InsecureListen allows TCP and HTTP beyond loopback without keys.
	InsecureListen bool
	// RequireBTSP makes a family-scoped node without FAMILY_SEED an error.
	RequireBTSP bool
	// NoDiscovery keeps the router to registered providers: without it, a
	// call no registered provider takes is served by a provider found in
	// the node's own socket directory (the IPC protocol's discovery order).
	NoDiscovery bool

	// CHPFixtures also hosts the CHP conformance fixture capabilities
	// (the upstream runner's profile) with their governance.
	CHPFixtures bool
	// CHPGateway, when set, makes the node's CHP HTTP surface (/host,
	// /capabilities, /invoke, /replay, /export on HTTP) a routing gateway
	// (chp/gateway) in front of these member CHP hosts' base URLs; Start
	// discovers them, so they must be up first. Requires HTTP. Unless
	// Memory, the gateway's evidence and results are kept durably in
	// <state>/chp-gateway.
	CHPGateway []string

	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Tracer traces the node's work: its routing (registry.Config.Tracer),
	// its host's dispatch and CHP boundary (host.Config.Tracer). Default:
	// OpenTelemetry exported over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT
	// is set (telemetry.TracingFromEnv, flushed by Stop), else none.
	Tracer tracing.Tracer
}

// ErrStateLocked is returned by Start when another node holds the state
// directory.
var ErrStateLocked = errors.New("another capmesh server is running with this state directory")

// ConfigError is a Start failure caused by the Config (or the environment
// it reads), as opposed to a failure to run.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// Node is a running node.
type Node struct {
	cfg    Config
	log    *slog.Logger
	host   *host.Host
	reg    *registry.Node
	closer func() // the registry's durable store
	tel    *telemetry.Metrics
	dash   *dashboard.Dashboard // nil without an HTTP listener
	otel   *telemetry.Tracing   // the exporter Start made from the environment

	cancel   context.CancelFunc
	done     chan struct{}
	err      error
	stopOnce sync.Once
}

// Start builds the node cfg describes and serves it until ctx ends or
// Stop is called. It returns once every listener is bound (or with the
// error that prevented it).
func Start(ctx context.Context, cfg Config) (*Node, error) {
	cfg.defaults()
	n := &Node{cfg: cfg, log: cfg.Logger, done: make(chan struct{})}
	if err := n.build(); err != nil {
		n.release()
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	n.cancel = cancel
	// Close the registry as soon as shutdown begins, not after the drain:
	// an open `ipc.watch` long-poll would otherwise hold the drain for its
	// full timeout. Calls still in flight get a clear "node closed" error.
	stopReg := context.AfterFunc(sctx, func() {
		_ = n.reg.Close()
		if n.dash != nil {
			n.dash.Close() // its event streams would hold the HTTP shutdown
		}
	})
	declareSelf(sctx, n)
	n.log.Info("capmesh node starting", "name", cfg.Name, "version", cfg.Version, "network", n.reg.Network(), "memory", cfg.Memory)
	go func() {
		defer close(n.done)
		defer n.release()
		defer stopReg()
		n.err = n.host.Serve(sctx)
	}()
	select {
	case <-n.host.Ready():
		return n, nil
	case <-n.done:
		cancel()
		if n.err == nil {
			n.err = ctx.Err()
		}
		return nil, n.err
	}
}

func (c *Config) defaults() {
	if c.Name == "" {
		c.Name = "capmesh"
	}
	if c.Domain == "" && !c.NoDomainLink {
		c.Domain = "mesh"
	}
	if c.Version == "" {
		c.Version = "0.0.0-dev"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 10 * time.Second
	}
}

// build makes the registry and the host and joins them.
func (n *Node) build() error {
	hcfg, err := n.hostConfig()
	if err != nil {
		return err
	}
	rcfg := n.cfg.Registry
	if rcfg.Logger == nil {
		rcfg.Logger = n.log
	}
	// A node serves what it has no registration for from its own socket
	// directory, as the IPC protocol's clients do when no registry runs.
	rcfg.Discover = !n.cfg.NoDiscovery

	if err := n.tracing(hcfg, &rcfg); err != nil {
		return err
	}
	// Metrics: the node observes its server, boundary and registry, and
	// serves the exposition at /metrics on its HTTP listener.
	n.tel = telemetry.New(telemetry.Options{})
	if hcfg.RPC.Observer == nil {
		hcfg.RPC.Observer = n.tel.RPC()
	}
	if hcfg.CHP.Observer == nil {
		hcfg.CHP.Observer = n.tel.CHP()
	}
	if rcfg.Observer == nil {
		rcfg.Observer = n.tel.RegistryObserver()
	}
	if err := n.durableState(&rcfg, hcfg); err != nil {
		return err
	}
	if n.reg, err = registry.NewNode(rcfg); err != nil {
		return &ConfigError{fmt.Errorf("registry: %w", err)}
	}
	domain := n.cfg.Domain
	if n.cfg.NoDomainLink {
		domain = ""
	}
	n.host, err = host.New(host.Info{
		Name:        n.cfg.Name,
		Version:     n.cfg.Version,
		Domain:      domain,
		Description: "capmesh node: registry, discovery and routing",
	}, hcfg)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return fmt.Errorf("%w: %w", ErrStateLocked, err)
	}
	if err != nil {
		return &ConfigError{err}
	}
	if n.cfg.CHPFixtures {
		if err := boundary.RegisterFixtures(n.host.Boundary()); err != nil {
			return fmt.Errorf("chp fixtures: %w", err)
		}
		n.log.Info("CHP conformance fixtures registered", "http", n.cfg.HTTP)
	}
	if err := n.mountGateway(); err != nil {
		return err
	}
	if err := n.mountRegistry(); err != nil {
		return err
	}
	n.tel.WatchRegistry(n.reg)
	n.tel.AddMethods(n.host.Names()...)
	if n.cfg.HTTP != "" {
		if err := n.host.MountHTTPKeyed("/metrics", n.tel.Handler()); err != nil {
			return err
		}
		return n.mountDashboard()
	}
	return nil
}

// mountDashboard serves the web UI at /ui on the HTTP listener. It reads
// the node through the node's own JSON-RPC bridge as the browser's caller,
// so the access layer answers it as it answers any HTTP caller.
func (n *Node) mountDashboard() error {
	auditDir := ""
	if n.cfg.Socket != "" && !n.cfg.NoSocket {
		auditDir = filepath.Dir(n.cfg.Socket)
	}
	d, err := dashboard.New(dashboard.Config{
		Node:              func() string { return "http://" + dialable(n.host.Addr("http")) },
		NodeOnThisMachine: true,
		Policy:            n.host.Access(),
		AuditDir:          auditDir,
		Logger:            n.log,
	})
	if err != nil {
		return err
	}
	n.dash = d
	h := d.Handler()
	if err := n.host.MountHTTP(dashboard.Prefix+"/", h); err != nil {
		return err
	}
	return n.host.MountHTTP(dashboard.Prefix, h)
}

// dialable turns a bound address into one to dial: an unspecified host
// (0.0.0.0, ::) is this machine's loopback.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if ip != nil && ip.To4() == nil {
			return net.JoinHostPort("::1", port)
		}
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

// tracing hands the Tracer — Config.Tracer, else OpenTelemetry from the
// environment — to the registry's router and to the host.
func (n *Node) tracing(hcfg *host.Config, rcfg *registry.Config) error {
	tr := n.cfg.Tracer
	if tr == nil {
		t, err := telemetry.TracingFromEnv(context.Background(), n.cfg.Name)
		if err != nil {
			return &ConfigError{err}
		}
		if t == nil {
			return nil
		}
		n.otel, tr = t, t.Tracer
		n.log.Info("tracing: exporting spans over OTLP/HTTP")
	}
	if hcfg.Tracer == nil {
		hcfg.Tracer = tr
	}
	if rcfg.Tracer == nil {
		rcfg.Tracer = tr
	}
	return nil
}

// mountGateway puts the CHP gateway's routes on the HTTP listener, in
// front of the node's own CHP binding, accepting the binding's shared
// keys and unscoped named keys (CHP_HOST_API_KEY[S]) from callers.
func (n *Node) mountGateway() error {
	if len(n.cfg.CHPGateway) == 0 {
		return nil
	}
	if n.cfg.HTTP == "" {
		return &ConfigError{errors.New("a CHP gateway needs an HTTP listener")}
	}
	gcfg := gateway.Config{HostID: n.cfg.Name + "-gateway", Version: n.cfg.Version, Members: n.cfg.CHPGateway, Logger: n.log}
	opts, err := chphttp.OptionsFromEnv()
	if err != nil {
		return &ConfigError{err}
	}
	if opts != nil {
		gcfg.Keys = opts.SharedKeys
		for _, k := range opts.NamedKeys {
			// The gateway cannot hold a key to its scope (it reaches the
			// members without credentials): a scoped key is not accepted.
			if len(k.Scope) == 0 {
				gcfg.Keys = append(gcfg.Keys, k.Key)
			}
		}
		if len(gcfg.Keys) == 0 && len(opts.NamedKeys) > 0 {
			// With no key the gateway would accept everyone.
			return &ConfigError{errors.New("a CHP gateway cannot enforce a named key's scope and every key is scoped: add an unscoped key (CHP_HOST_API_KEY, or name:key in CHP_HOST_API_KEYS)")}
		}
	}
	if !n.cfg.Memory {
		// The gateway's own evidence and exactly-once results, durable
		// beside the node's state, so a retried id replays after a restart.
		dir, err := xdg.StateDir(n.cfg.DataDir)
		if err != nil {
			return &ConfigError{err}
		}
		dir = filepath.Join(dir, "chp-gateway")
		if err := xdg.EnsurePrivateDir(dir); err != nil {
			return fmt.Errorf("chp gateway store: %w", err)
		}
		store, err := logstore.Open(dir, &logstore.Options{Logger: n.log})
		if err != nil {
			return fmt.Errorf("chp gateway store: %w", err)
		}
		gcfg.Store = store
		prev := n.closer
		n.closer = func() {
			_ = store.Close()
			if prev != nil {
				prev()
			}
		}
	}
	gw, err := gateway.New(gcfg)
	if err != nil {
		return &ConfigError{err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := gw.Discover(ctx); err != nil {
		n.log.Warn("CHP gateway: starting with members missing", "err", err)
	}
	for _, p := range gateway.Patterns() {
		if err := n.host.MountHTTP(p, gw.Handler()); err != nil {
			return err
		}
	}
	n.log.Info("CHP gateway serving", "members", n.cfg.CHPGateway, "host_id", gw.HostID())
	return nil
}

// hostConfig is the host half of the Config.
func (n *Node) hostConfig() (*host.Config, error) {
	c := n.cfg
	hcfg := &host.Config{
		Socket:         c.Socket,
		NoSocket:       c.NoSocket,
		NoDomainLink:   c.NoDomainLink,
		TCP:            c.TCP,
		HTTP:           c.HTTP,
		DataDir:        c.DataDir,
		Ephemeral:      c.Memory,
		EvidenceURL:    c.EvidenceURL,
		RequireBTSP:    c.RequireBTSP,
		InsecureListen: c.InsecureListen,
		NoAnnounce:     true, // the node is what others announce to
		DrainTimeout:   c.DrainTimeout,
		Logger:         n.log,
		RPC:            c.RPC,
	}
	if c.CHPFixtures {
		// The fixture profile's governance: a medium risk ceiling (so the
		// high-risk fixture is denied) and the rule-based safety evaluator.
		hcfg.CHP.Policy = boundary.FixturePolicy()
		hcfg.CHP.Safety = boundary.FixtureSafety()
	}
	return hcfg, nil
}

// durableState loads the keys and opens the registry's SQLite store,
// unless the node keeps everything in memory.
func (n *Node) durableState(rcfg *registry.Config, hcfg *host.Config) error {
	if n.cfg.RootKeyFile != "" && rcfg.RootKey == nil {
		root, err := identity.Load(n.cfg.RootKeyFile)
		if err != nil {
			return &ConfigError{fmt.Errorf("root key: %w", err)}
		}
		rcfg.RootKey = root.Ed25519()
	}
	if n.cfg.RegistryURL != "" && rcfg.Store == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		st, err := registry.OpenStoreURL(ctx, n.cfg.RegistryURL, n.log)
		if err != nil {
			return fmt.Errorf("registry store: %w", err)
		}
		rcfg.Store = st
		n.closer = func() { _ = st.Close() }
	}
	if n.cfg.Memory {
		return nil
	}
	// The node signs with the user's capmesh key, the one `capmesh keys`
	// shows, and keeps its registry in SQLite beside it.
	keyPath, err := identity.DefaultKeyPath(n.cfg.DataDir)
	if err != nil {
		return &ConfigError{err}
	}
	hcfg.KeyFile = keyPath
	if rcfg.RootKey == nil && n.cfg.RegistryURL == "" {
		// The genesis root key lives beside the node key, separate from the
		// network-authority key (RFC-001 rule 8).
		root, created, err := identity.LoadOrCreate(filepath.Join(filepath.Dir(keyPath), "root.pem"))
		if err != nil {
			return fmt.Errorf("root key: %w", err)
		}
		if created {
			n.log.Info("generated the genesis root key", "key_id", root.Public().KeyID())
		}
		rcfg.RootKey = root.Ed25519()
	}
	if rcfg.Store != nil {
		return nil
	}
	dir, err := xdg.StateDir(n.cfg.DataDir)
	if err != nil {
		return &ConfigError{err}
	}
	store, err := sqlite.Open(filepath.Join(dir, "registry.db"))
	if err != nil {
		return fmt.Errorf("registry store: %w", err)
	}
	rcfg.Store = store
	n.closer = func() { _ = store.Close() }
	return nil
}

// mountRegistry puts the registry's methods and HTTP routes on the host,
// with what they cost for planners reading capabilities.list: routing is
// a network hop; a heartbeat or an unregistration needs a registration.
func (n *Node) mountRegistry() error {
	if err := n.host.Mount(api.RPC(n.reg)); err != nil {
		return err
	}
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
		if err := n.host.Annotate(a.method, a.opts...); err != nil {
			n.log.Debug("registry method not annotated", "method", a.method, "err", err)
		}
	}
	if n.cfg.HTTP == "" {
		return nil
	}
	// The Genesis-Mesh Network-Authority routes; the registry's own GET
	// /health is left to the CHP binding, which owns /health on every host.
	rh := api.HTTPHandler(n.reg)
	for _, p := range api.HTTPRoutes() {
		if err := n.host.MountHTTP(p, rh); err != nil {
			return err
		}
	}
	return nil
}

// release closes what build opened, in reverse order.
func (n *Node) release() {
	if n.host != nil {
		_ = n.host.Close()
	}
	if n.reg != nil {
		_ = n.reg.Close()
	}
	if n.closer != nil {
		n.closer()
	}
	if n.otel != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := n.otel.Shutdown(ctx); err != nil {
			n.log.Warn("tracing: flushing spans", "err", err)
		}
	}
}

// Addr returns the bound address of a transport ("unix", "tcp", "http"),
// or "" when the node does not listen on it.
func (n *Node) Addr(transport string) string { return n.host.Addr(transport) }

// Host returns the node's host (its boundary, evidence, surface).
func (n *Node) Host() *host.Host { return n.host }

// Metrics returns the node's metrics, served at /metrics on its HTTP
// listener; a program may register its own collectors on its Registry.
func (n *Node) Metrics() *telemetry.Metrics { return n.tel }

// Registry returns the node's registry.
func (n *Node) Registry() *registry.Node { return n.reg }

// Done is closed once the node has stopped serving.
func (n *Node) Done() <-chan struct{} { return n.done }

// Wait blocks until the node stops and returns why: nil after a graceful
// stop (Stop, the context's end, or health.drain), else the serving error.
func (n *Node) Wait() error {
	<-n.done
	return n.err
}

// Stop drains the calls in flight (at most Config.DrainTimeout) and stops
// the node; ctx bounds the wait.
func (n *Node) Stop(ctx context.Context) error {
	n.stopOnce.Do(n.cancel)
	select {
	case <-n.done:
		return n.err
	case <-ctx.Done():
		return ctx.Err()
	}
}
