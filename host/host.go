package host

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capmesh/capmesh/access"
	"github.com/capmesh/capmesh/btsp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/chphttp"
	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/logstore"
	"github.com/capmesh/capmesh/identity"
	"github.com/capmesh/capmesh/internal/xdg"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/tracing"
	"github.com/capmesh/capmesh/wire"
)

// Info is what a host says about itself: the identity.get result and the
// primal and version of capabilities.list.
type Info struct {
	// Name is the canonical primal name: lowercase letters, digits, '-'
	// and '_', starting with a letter (it names the socket, <name>.sock).
	Name string
	// Version is the host's SemVer version, e.g. "1.2.0" or "0.3.0-dev".
	Version string
	// Domain is the primary capability domain (identity.get's domain). It
	// also names the capability-domain symlink <domain>.sock next to the
	// socket. Optional.
	Domain string
	// License is an SPDX license identifier (identity.get's license).
	// Optional.
	License string
	// Description, when set, describes the group of Domain in
	// provided_capabilities. Optional.
	Description string
}

// Config says where and how a host serves. A nil *Config, and every zero
// field, means the default stated on the field.
type Config struct {
	// Socket is the Unix socket path. Default: endpoint.SocketPath(Name),
	// i.e. $XDG_RUNTIME_DIR/biomeos/<name>.sock, or <name>-$FAMILY_ID.sock
	// when running family-scoped.
	Socket string
	// NoSocket serves without a Unix socket (then TCP or HTTP must be
	// set). The Primal IPC Protocol wants a socket; use this only where
	// there is no filesystem to put one in.
	NoSocket bool
	// NoDomainLink skips the <domain>.sock symlink that is otherwise
	// created next to the socket when Domain is set and differs from Name.
	NoDomainLink bool
	// TCP, when set, also serves newline JSON-RPC on this address
	// ("127.0.0.1:9000"; port 0 picks a free port, see Host.Addr).
	TCP string
	// HTTP, when set, serves on this address: the JSON-RPC bridge at
	// POST /jsonrpc, the CHP HTTP binding (/host, /invoke, /replay/…),
	// and whatever Mount added. Refused together with RequireBTSP on a
	// family-scoped host, since HTTP here is cleartext.
	HTTP string

	// DataDir is the state directory. Default $XDG_STATE_HOME/capmesh.
	DataDir string
	// Ephemeral keeps nothing on disk: a fresh in-memory key and
	// in-memory evidence. For tests and throw-away hosts.
	Ephemeral bool
	// Key is the host's Ed25519 key: it signs the announcement of
	// capabilities.list and CHP evidence bundles. Default: the key in
	// KeyFile, created on first start.
	Key ed25519.PrivateKey
	// KeyFile is where the key lives. Default <DataDir>/keys/<name>.pem
	// (mode 0600 in a 0700 directory).
	KeyFile string
	// Evidence stores CHP execution evidence; the host does not close a
	// store it is given. Default: the durable embedded log in
	// <DataDir>/evidence/<name>, or memory when Ephemeral.
	Evidence evidence.Store
	// EvidenceURL, when set, names a database the host opens (and
	// closes) as its evidence store instead, through evidence.OpenURL:
	// postgres://… once the program imports evidence/postgres, a store
	// many hosts may share. It takes precedence over Ephemeral's memory
	// store and cannot be combined with Evidence.
	EvidenceURL string
	// CHP configures the boundary beyond what the host sets itself
	// (HostID, HostVersion, Store, Key, Logger are filled in when empty;
	// RevocationsFile and MandateUsesFile too, in <DataDir>/mandates unless
	// Ephemeral): policy, safety, output-schema strictness, result windows.
	CHP boundary.Config
	// CHPHTTP configures the CHP HTTP binding (API keys). Default:
	// chphttp.OptionsFromEnv (CHP_HOST_API_KEY, CHP_HOST_API_KEYS). The
	// same keys are the credentials of every binding (docs/access.md): the
	// X-CHP-Key header on HTTP, params._meta.chp_key on any JSON-RPC
	// binding. A host without keys that serves TCP or HTTP is open to
	// anonymous callers (the CHP local-first default); one that serves only
	// its Unix socket answers invocations for its own user alone.
	CHPHTTP *chphttp.Options
	// InsecureListen lets a host without keys bind TCP or HTTP beyond
	// loopback. Without it such a host refuses to start, since anyone who
	// can reach the address could invoke every capability.
	InsecureListen bool

	// BTSP is the family-scoped secure transport of the stream listeners
	// (docs/btsp.md). Nil: on a family-scoped host (FAMILY_ID set and not
	// "default") it is read from FAMILY_ID and FAMILY_SEED; a standalone
	// host serves cleartext. With BTSP, a connection must complete the
	// handshake, except for the discovery and health methods served in
	// cleartext (btsp.DefaultCleartext); any other cleartext request is
	// answered with the Capability Wire Standard's -32600 "BTSP handshake
	// required" error and the connection closed (TS-01).
	// transport_security says which.
	BTSP *btsp.Config

	// RequireBTSP makes a family-scoped host without a family seed an
	// error instead of a host that serves cleartext (with a warning).
	RequireBTSP bool

	// NoAnnounce skips registration with a node.
	NoAnnounce bool
	// Node is the node to announce to, and the one Provider calls through.
	// Default: $DISCOVERY_SOCKET, then capmesh.sock or songbird.sock in the
	// biomeos directory — capmesh-<FAMILY_ID>.sock and
	// songbird-<FAMILY_ID>.sock on a family-scoped host (see
	// registry/announce) — and Provider discovers providers itself.
	Node string
	// Network is the network name of signed descriptors. Default "capmesh".
	Network string

	// RPC tunes the JSON-RPC server (frame size, connection limits,
	// timeouts).
	RPC jsonrpc.ServerOptions
	// DrainTimeout bounds how long a stopping host waits for the calls in
	// flight. Default 10 s.
	DrainTimeout time.Duration
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Tracer, when set, traces the host's work (package telemetry's
	// OpenTelemetry Tracer, for a host that opts in): a span per direct
	// capability call ("capmesh.host.dispatch", child of the caller's
	// params._meta.traceparent), the boundary's spans (CHP.Tracer, unless
	// set), and a client span per call through Provider. Nil (the
	// default) starts no span; the caller's trace id is still recorded in
	// the evidence and carried on to Provider's calls.
	Tracer tracing.Tracer
}

// Host is a capability provider: the registered capabilities, the built-in
// surface of the Capability Wire Standard, the CHP boundary every
// capability call passes through, and the listeners it serves on. Create it
// with New, register capabilities with Register (and Handle, Mount,
// Consumes), then Serve. A Host serves once.
type Host struct {
	info    Info
	cfg     Config
	log     *slog.Logger
	key     ed25519.PrivateKey
	ikey    *identity.PrivateKey // the same key, for wire.SignAnnouncement
	b       *boundary.Boundary
	acc     *access.Policy
	btsp    *btsp.Config // nil: cleartext stream listeners
	store   evidence.Store
	closers []io.Closer
	started time.Time

	mu        sync.Mutex // registration state and lifecycle below
	caps      map[string]*method
	consumed  []string
	mounts    []jsonrpc.Assigner
	mountList []string               // names advertised by mounts
	notes     map[string]*capOptions // Annotate of mounted methods
	https     []httpMount
	bound     []string // transports bound, in wire order
	serving   bool
	served    bool
	closed    bool

	tab atomic.Pointer[table]

	drain     drainer
	accepting atomic.Bool // listeners bound (or a local pair made)
	addrs     sync.Map    // transport → address string
	ready     chan struct{}
	stop      chan struct{} // closed by a completed health.drain
}

type httpMount struct {
	pattern string
	h       http.Handler
	keyed   bool // behind access.Policy.RequireKey
}

// New returns a host named by info, configured by cfg (nil for defaults).
// It loads or creates the host key and opens the evidence store, so it
// fails early — with an error naming the field — when something is wrong.
func New(info Info, cfg *Config) (*Host, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if err := info.validate(); err != nil {
		return nil, err
	}
	if c.NoSocket && c.TCP == "" && c.HTTP == "" {
		return nil, errors.New("host: Config.NoSocket needs TCP or HTTP, or there is nothing to listen on")
	}
	if c.RequireBTSP && c.HTTP != "" && endpoint.FamilyID() != "" {
		return nil, errors.New("host: Config.RequireBTSP on a family-scoped host cannot serve cleartext HTTP; drop Config.HTTP")
	}
	secureCfg, btspWarn, err := resolveBTSP(&c)
	if err != nil {
		return nil, err
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if btspWarn != "" {
		c.Logger.Warn(btspWarn, "family", endpoint.FamilyID())
	}
	h := &Host{
		info:    info,
		cfg:     c,
		btsp:    secureCfg,
		log:     c.Logger,
		caps:    map[string]*method{},
		started: time.Now(),
		ready:   make(chan struct{}),
		stop:    make(chan struct{}),
	}
	h.drain.init()
	if err := h.openAccess(); err != nil {
		return nil, err
	}
	if err := h.openKey(); err != nil {
		return nil, err
	}
	if err := h.openEvidence(); err != nil {
		h.closeAll()
		return nil, err
	}
	bc := c.CHP
	if bc.HostID == "" {
		bc.HostID = info.Name
	}
	if bc.HostVersion == "" {
		bc.HostVersion = info.Name + "/" + info.Version
	}
	if bc.Version == "" {
		bc.Version = info.Version
	}
	bc.Store = h.store
	if bc.Key == nil {
		bc.Key = h.key
	}
	if bc.Logger == nil {
		bc.Logger = h.log
	}
	if bc.Tracer == nil {
		bc.Tracer = c.Tracer
	}
	if !c.Ephemeral && (bc.RevocationsFile == "" || bc.MandateUsesFile == "") {
		// Accepted mandate revocations and the uses of capped mandates
		// outlive a restart, beside (never inside) the evidence.
		dir, err := xdg.SubDir(c.DataDir, "mandates")
		if err != nil {
			h.closeAll()
			return nil, fmt.Errorf("host: mandates: %w", err)
		}
		if bc.RevocationsFile == "" {
			bc.RevocationsFile = filepath.Join(dir, info.Name+".revocations.jsonl")
		}
		if bc.MandateUsesFile == "" {
			bc.MandateUsesFile = filepath.Join(dir, info.Name+".uses.jsonl")
		}
	}
	b, err := boundary.New(bc)
	if err != nil {
		h.closeAll()
		return nil, fmt.Errorf("host: %w", err)
	}
	h.b = b
	return h, nil
}

func (i Info) validate() error {
	if err := endpoint.ValidateName(i.Name); err != nil {
		return fmt.Errorf("host: Info.Name %q: %w", i.Name, err)
	}
	if !wire.IsSemVer(i.Version) {
		// The audit's L2.version check would fail the host: refuse now.
		return fmt.Errorf("host: Info.Version %q: want a SemVer 2.0.0 version such as 1.0.0 or 0.1.0-dev (not \"1.0\", \"v1.0.0\" or \"dev\")", i.Version)
	}
	if i.Domain != "" {
		if err := endpoint.ValidateName(i.Domain); err != nil {
			return fmt.Errorf("host: Info.Domain %q: %w", i.Domain, err)
		}
	}
	return nil
}

// openAccess builds the access policy every binding passes through: the
// keys of Config.CHPHTTP (or the environment), open to anonymous callers
// when there are none and the host opens a TCP or HTTP listener.
func (h *Host) openAccess() error {
	if h.cfg.CHPHTTP == nil {
		o, err := chphttp.OptionsFromEnv()
		if err != nil {
			return fmt.Errorf("host: CHP_HOST_API_KEYS: %w", err)
		}
		h.cfg.CHPHTTP = o
	}
	keyed := len(h.cfg.CHPHTTP.SharedKeys)+len(h.cfg.CHPHTTP.NamedKeys) > 0
	h.acc = access.NewPolicy(access.Config{
		Keys: h.cfg.CHPHTTP,
		Open: !keyed && (h.cfg.TCP != "" || h.cfg.HTTP != ""),
		UID:  uint32(os.Getuid()),
	})
	return nil
}

// Access returns the host's access policy.
func (h *Host) Access() *access.Policy { return h.acc }

// openEvidence picks the evidence store: the one given, the database
// EvidenceURL names, memory when ephemeral, else the durable log in the
// state directory.
func (h *Host) openEvidence() error {
	switch {
	case h.cfg.Evidence != nil && h.cfg.EvidenceURL != "":
		return errors.New("host: Config.Evidence and Config.EvidenceURL are both set; give one")
	case h.cfg.Evidence != nil:
		h.store = h.cfg.Evidence
	case h.cfg.EvidenceURL != "":
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := evidence.OpenURL(ctx, h.cfg.EvidenceURL, h.log)
		if err != nil {
			return fmt.Errorf("host: Config.EvidenceURL: %w", err)
		}
		h.store = s
		h.closers = append(h.closers, s)
	case h.cfg.Ephemeral:
		h.store = evidence.NewMemory()
	default:
		dir, err := xdg.SubDir(h.cfg.DataDir, "evidence")
		if err != nil {
			return fmt.Errorf("host: evidence: %w", err)
		}
		dir = filepath.Join(dir, h.info.Name)
		if err := xdg.EnsurePrivateDir(dir); err != nil {
			return fmt.Errorf("host: evidence: %w", err)
		}
		s, err := logstore.Open(dir, &logstore.Options{Logger: h.log})
		if err != nil {
			return fmt.Errorf("host: evidence: %w", err)
		}
		h.store = s
		h.closers = append(h.closers, s)
	}
	return nil
}

// Boundary returns the host's CHP boundary, for direct Invoke, Replay or
// Export calls in process.
func (h *Host) Boundary() *boundary.Boundary { return h.b }

// Info returns what the host says about itself.
func (h *Host) Info() Info { return h.info }

// PublicKey returns the host's Ed25519 public key, the one that signs its
// announcement.
func (h *Host) PublicKey() ed25519.PublicKey { return h.key.Public().(ed25519.PublicKey) }

// Ready is closed once Serve has bound every listener and answers calls.
func (h *Host) Ready() <-chan struct{} { return h.ready }

// Addr returns the address a transport is bound to once the host is ready:
// the socket path for "unix", host:port for "tcp" and "http"; "" when that
// transport is not served.
func (h *Host) Addr(transport string) string {
	v, _ := h.addrs.Load(transport)
	s, _ := v.(string)
	return s
}

// Close releases what New opened (the evidence store it owns). Serve calls
// it on return; call it yourself only for a host that never served.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.mu.Unlock()
	return h.closeAll()
}

func (h *Host) closeAll() error {
	var errs []error
	for i := len(h.closers) - 1; i >= 0; i-- {
		if err := h.closers[i].Close(); err != nil {
			errs = append(errs, err)
		}
	}
	h.closers = nil
	return errors.Join(errs...)
}
