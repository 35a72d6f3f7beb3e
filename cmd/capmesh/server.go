package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/capmesh/capmesh/endpoint"
	_ "github.com/capmesh/capmesh/evidence/postgres" // postgres:// for --evidence
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/identity"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/node"
	"github.com/capmesh/capmesh/registry"
	_ "github.com/capmesh/capmesh/registry/etcd" // etcd:// for --registry
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
	registryURL  string
	machineID    string
	machineIDSet bool // --machine-id was given, maybe empty
	requireBTSP  bool
	chpFixtures  bool
	chpGateway   []string
	rateLimits   map[string]int
	insecure     bool
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
and hosts may append to one database; --registry etcd://host:2379,… keeps
the registry in etcd, where many nodes share one registry (docs/operations.md);
--machine-id names the machine the node runs on in such a registry
(default CAPMESH_MACHINE_ID, else /etc/machine-id).

Who may do what is the same on every listener (docs/access.md): the
node's own user over the Unix socket may do everything; with keys
(CHP_HOST_API_KEY, CHP_HOST_API_KEYS) callers present X-CHP-Key on HTTP or
params._meta.chp_key on JSON-RPC; without keys, --port and --http are open
to anyone who can reach them, which is why an address beyond loopback is
refused without keys unless --insecure-listen is given. A routed call
carries who the caller is to the provider, which judges it by the same
table.

It starts standalone when no FAMILY_ID or NODE_ID is set, and drains
in-flight calls on SIGINT/SIGTERM or health.drain.`,
		Example: `  capmesh server
  capmesh server --port 9000 --http 127.0.0.1:8080
  capmesh server --memory --trust-key 8AARks4noJtut6Cdhly0z4Wjj9MkHMYeIRZVFEHrsSg=`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.machineIDSet = cmd.Flags().Changed("machine-id")
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
	fl.StringVar(&f.httpAddr, "http", "", "also serve HTTP on this address (JSON-RPC at /jsonrpc, the CHP binding, the registry routes, Prometheus metrics at /metrics), e.g. 127.0.0.1:8080")
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
	fl.StringVar(&f.registryURL, "registry", "", "keep the registry (registrations, trust, the genesis and authority keys) in this etcd cluster (etcd://host:2379[,host:2379…][/prefix] on loopback, etcds://[user@]host:2379…?ca=&cert=&key=&password_file= beyond it; docs/operations.md), shared by every node started with it; wins over --memory for the registry")
	fl.StringVar(&f.machineID, "machine-id", "", "name of the machine this node runs on, as "+endpoint.EnvMachineID+" gives it (which this flag overrides): nodes sharing a --registry dial a registration naming a Unix socket or loopback address only when it was made on a node of the same machine (default: "+endpoint.EnvMachineID+", else /etc/machine-id)")
	fl.StringVar(&f.evidence, "evidence", "", "keep CHP evidence in this PostgreSQL database (postgres://user@host/db), which many nodes and hosts may share; wins over --memory for the evidence")
	fl.BoolVar(&f.chpFixtures, "chp-fixtures", false, "also host the CHP conformance fixture capabilities (upstream conformance/FIXTURES.md) so the upstream runner can be pointed at --http")
	fl.StringSliceVar(&f.chpGateway, "chp-gateway", nil, "serve the CHP HTTP routes (--http) as a routing gateway in front of these member CHP hosts (URL[,URL…]); start the members first")
	fl.StringToIntVar(&f.rateLimits, "http-rate-limit", nil, "per-client-IP limits a minute of the HTTP registry writes, as agents=N (POST/DELETE /agents), join=N (/join, /renew, /heartbeat), admin=N (/admin/*); 0 is no limit (default 30 each)")
	fl.BoolVar(&f.insecure, "insecure-listen", false, "serve --port/--http beyond loopback without keys (CHP_HOST_API_KEY[S]); refused otherwise, since anyone who can reach the address could invoke every capability")
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
	if err := endpoint.CheckSocketModeEnv(f.name); err != nil && !f.noSocket {
		return usageErrorf("%v", err) // a bad setting, not a failure to serve
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
	if f.machineIDSet {
		if err := checkMachineName(f.machineID); err != nil {
			return usageErrorf("--machine-id %q: %v", f.machineID, err)
		}
	}
	return nil
}

// checkMachineName refuses a --machine-id that cannot name a machine:
// blank (CAPMESH_MACHINE_ID blank means "not set", so the flag would
// silently fall back to /etc/machine-id), not UTF-8, or with control
// characters (a line break or tab pasted in, which would make two names
// that read alike different machines). White space around the name is
// ignored, as in CAPMESH_MACHINE_ID.
func checkMachineName(name string) error {
	switch name = strings.TrimSpace(name); {
	case name == "":
		return errors.New("want a name for this machine (leave the flag out to use " + endpoint.EnvMachineID + " or /etc/machine-id)")
	case !utf8.ValidString(name):
		return errors.New("not UTF-8")
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return errors.New("control characters in a machine name")
	}
	return nil
}

// registryConfig turns the trust flags into the registry's configuration.
func (f *serverFlags) registryConfig() (registry.Config, error) {
	cfg := registry.Config{Network: f.network, LocalTTL: f.localTTL}
	if f.machineIDSet {
		cfg.Machine = endpoint.MachineIDFor(f.machineID) // else the registry's default, endpoint.MachineID()
	}
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

// nodeConfig maps the flags to the node's Config.
func (f *serverFlags) nodeConfig(a *app) (node.Config, error) {
	rcfg, err := f.registryConfig()
	if err != nil {
		return node.Config{}, err
	}
	cfg := node.Config{
		Name:           f.name,
		Domain:         f.domain,
		NoDomainLink:   f.domain == "",
		Version:        versionString(),
		Socket:         f.socket,
		NoSocket:       f.noSocket,
		HTTP:           f.httpAddr,
		DataDir:        a.dataDir,
		Memory:         f.memory,
		EvidenceURL:    f.evidence,
		RegistryURL:    f.registryURL,
		RootKeyFile:    f.rootKey,
		Registry:       rcfg,
		RequireBTSP:    f.requireBTSP,
		InsecureListen: f.insecure,
		CHPFixtures:    f.chpFixtures,
		CHPGateway:     f.chpGateway,
		DrainTimeout:   f.drainTimeout,
		Logger:         a.log,
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
	if f.port != 0 {
		cfg.TCP = net.JoinHostPort(f.listen, fmt.Sprint(f.port))
	}
	if f.rootKey != "" {
		if _, err := os.Stat(f.rootKey); err != nil {
			return cfg, withCode(exitUsage, fmt.Errorf("--root-key: %w", err))
		}
	}
	return cfg, nil
}

// runServer runs the node (package node) until the context ends or the
// node is drained, and maps its errors to the exit contract.
func runServer(ctx context.Context, a *app, f *serverFlags) error {
	if err := f.validate(); err != nil {
		return err
	}
	cfg, err := f.nodeConfig(a)
	if err != nil {
		return err
	}
	// One logger for the whole node: what defaults to slog.Default (the
	// evidence and registry stores among others) logs through it too.
	slog.SetDefault(a.log)
	n, err := node.Start(ctx, cfg)
	if err == nil {
		err = n.Wait()
	}
	var ce *node.ConfigError
	switch {
	case err == nil:
		return ctx.Err()
	case errors.Is(err, node.ErrStateLocked):
		return withCode(exitFailure, err)
	case isAddrError(err), errors.Is(err, host.ErrInsecureListen):
		return withCode(exitUsage, err) // a malformed --http or --listen value; an exposed listener
	case errors.Is(err, endpoint.ErrSocketInUse) || isListenError(err):
		return withCode(exitFailure, err) // cannot bind: a failure, not "unreachable"
	case errors.As(err, &ce):
		return withCode(exitUsage, err)
	}
	return err
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
