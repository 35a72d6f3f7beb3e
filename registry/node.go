package registry

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/internal/refusal"
	"github.com/capmesh/capmesh/registry/internal/state"
	"github.com/capmesh/capmesh/registry/store"
	"github.com/capmesh/capmesh/tracing"
)

// Config configures a Node. The zero value of every field is a usable
// default, except that a production node should set Store (registry/sqlite)
// so that registrations, enrolments and the CRL survive restarts.
type Config struct {
	// Network is the network name: descriptors must carry it and the
	// genesis block names it. Default "capmesh".
	Network string
	// Store keeps the durable state. Default: an in-memory store.
	Store Store
	// Authority is the Network-Authority key that signs join certificates,
	// CRLs and policy manifests. When nil, the node
	// generates one on first start and keeps it in Store (kind "secret";
	// the SQLite file is 0600).
	Authority ed25519.PrivateKey
	// AuthorityKeyID names Authority in signatures. Default "na-capmesh".
	AuthorityKeyID string
	// RootKey signs the genesis block, which names it as root_public_key
	// and Authority as network_authority.public_key. It must differ from
	// Authority (RFC-001 rule 8: the two are not collapsed); NewNode
	// refuses the same key. When nil, the node generates one on first start
	// and keeps it in Store (kind "secret", key "root").
	RootKey ed25519.PrivateKey
	// OperatorKeys authorise /admin/* requests (X-Admin-Key-Id → key).
	OperatorKeys map[string]ed25519.PublicKey
	// TrustedKeys are node public keys (standard base64) trusted without a
	// join certificate (operator pinning). They are still subject to
	// revocation by key_compromise.
	TrustedKeys []string
	// Skew is the tolerance on the lower bound of a descriptor's TTL and on
	// request timestamps. Default 5 minutes.
	Skew time.Duration
	// LocalTTL is the lifetime of an unsigned local registration, renewed
	// by ipc.heartbeat. Default 90 s.
	LocalTTL time.Duration
	// MaxDescriptorTTL, when positive, refuses descriptors whose window is
	// longer. Default 0 (no cap, as the reference).
	MaxDescriptorTTL time.Duration
	// SweepInterval is how often expired entries are dropped from the index
	// (emitting "expired" events) and purged from the store. Reads never
	// return an expired entry in between. Default 1 s.
	SweepInterval time.Duration
	// ProbeTimeout bounds the identity.get probe of a local registration.
	// Default 2 s.
	ProbeTimeout time.Duration
	// Dial connects to a provider or a registering host's endpoint
	// ("unix:///path", "tcp://host:port", "http://host:port/path").
	// Default: jsonrpc.Dial / jhttp.NewClient.
	Dial func(ctx context.Context, endpoint string) (jsonrpc.Caller, error)
	// Machine identifies the machine the node runs on; a shared store
	// keeps it with each registration naming an endpoint only its own
	// machine reaches, which the router then dials only on that machine
	// (MayDial). Default endpoint.MachineID().
	Machine string
	// UID is the node's own user id, the only one whose Unix-socket peers
	// may register unsigned. Default os.Getuid().
	UID *uint32
	// WatchHistory is how many events ipc.watch can at least replay (up to
	// twice as many are kept between trims). Default 10000.
	WatchHistory int
	// RateLimits are the per-client limits of the HTTP surface's writes
	// (POST /agents, /join, /admin/*, …). The zero value is the defaults
	// (30 a minute per client IP for each group).
	RateLimits RateLimits
	// MaxHops is how many routers a request may have passed (its
	// params._meta.hops) for this node to forward it once more; a request
	// at the limit is refused with CodeHopLimit. Default DefaultMaxHops.
	MaxHops int
	// Discover lets the router serve a method no registered provider
	// takes through filesystem discovery in the node's own socket
	// directory (Primal IPC Protocol order, without registry or TCP; see
	// routeDiscovered). Off by default; node.Start turns it on.
	Discover bool

	// Observer, when set, is told of changes, trust changes, routed calls
	// and Store errors, for metrics. Nil costs nothing.
	Observer Observer
	// Tracer, when set, traces every routed call: a span per hop
	// ("capmesh.route"), child of the caller's params._meta.traceparent,
	// whose own traceparent the provider receives. Nil (the default)
	// starts no span and forwards the caller's traceparent untouched.
	Tracer tracing.Tracer
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Source tells how an entry was registered.
const (
	SourceLocal      = state.SourceLocal      // unsigned ipc.register from a same-user Unix peer
	SourceDescriptor = state.SourceDescriptor // signed RFC-005 descriptor
)

// Verdict is the trust policy's answer about a provider, carried by every
// result so that a consumer can re-evaluate when trust changes.
type Verdict = state.Verdict

// Entry is one live registration as the registry reports it: Key (the
// node public key for a descriptor, "local:<name>" for a local
// registration), name, capabilities, endpoint, source, window and trust
// verdict, and a descriptor's signed wire form (shared: do not modify it).
type Entry = state.Entry

// entry is the indexed form.
type entry = state.Registration

// Node is the registry service. Create it with NewNode, mount
// api.RPC(n) on a jsonrpc.Server and api.HTTPHandler(n) on an
// http.Server (package registry/api), and Close it.
type Node struct {
	cfg Config
	log *slog.Logger
	st  Store

	// Two locks, so that reads never wait for the disk. wmu serializes
	// every change from its checks to its end, including the Store write;
	// mu guards the in-memory state readers see and is write-locked only
	// for the moment a committed change is published (publish). A writer
	// reads shared state under wmu alone: no one else changes it.
	wmu      sync.Mutex
	mu       sync.RWMutex
	state    *state.State // the registrations, the index, trust, events
	changed  chan struct{}
	closed   bool
	done     chan struct{} // closed by Close: ends pending watches
	stopLoop context.CancelFunc
	loopDone chan struct{}
	self     endpoint.SelfSet // the node's own listeners (loop protection)
	// Shared mode (sharednode.go): the store other nodes write too
	// (state.Shared holds what the node knows of it) and the feed's end.
	shared     SharedStore
	followDone chan struct{}
}

// NewNode loads the durable state from cfg.Store and starts the expiry
// sweeper.
func NewNode(cfg Config) (*Node, error) {
	if cfg.Network == "" {
		cfg.Network = "capmesh"
	}
	if cfg.Store == nil {
		cfg.Store = NewMemStore()
	}
	if cfg.AuthorityKeyID == "" {
		cfg.AuthorityKeyID = "na-capmesh"
	}
	if cfg.Skew == 0 {
		cfg.Skew = descriptor.DefaultSkew
	}
	if cfg.LocalTTL == 0 {
		cfg.LocalTTL = 90 * time.Second
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = time.Second
	}
	if cfg.ProbeTimeout == 0 {
		cfg.ProbeTimeout = 2 * time.Second
	}
	if cfg.WatchHistory == 0 {
		cfg.WatchHistory = 10000
	}
	if cfg.MaxHops <= 0 {
		cfg.MaxHops = DefaultMaxHops
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Dial == nil {
		cfg.Dial = DialEndpoint
	}
	if cfg.Machine == "" {
		cfg.Machine = endpoint.MachineID()
	}
	if cfg.UID == nil {
		u := currentUID()
		cfg.UID = &u
	}
	for _, k := range cfg.TrustedKeys {
		if _, err := descriptor.DecodePublicKey(k); err != nil {
			return nil, fmt.Errorf("registry: trusted key %q: %w", k, err)
		}
	}
	n := &Node{
		cfg:     cfg,
		log:     cfg.Logger,
		st:      cfg.Store,
		state:   state.New(cfg.Now, cfg.Skew, cfg.WatchHistory),
		changed: make(chan struct{}),
		done:    make(chan struct{}),
	}
	if cfg.Observer != nil {
		n.st = store.Observe(cfg.Store, cfg.Observer.OnStoreError)
	}
	load := n.load
	if sh, ok := cfg.Store.(SharedStore); ok {
		n.shared = sh
		n.state.Follow(sh.NodeID())
		load = n.loadShared
	}
	if err := load(context.Background()); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.stopLoop = cancel
	n.loopDone = make(chan struct{})
	n.followDone = make(chan struct{})
	go n.sweepLoop(ctx)
	if n.shared != nil {
		go n.followLoop(ctx)
	} else {
		close(n.followDone)
	}
	return n, nil
}

// Close stops the sweeper and ends pending watches at once (a server
// should close the node when its shutdown begins, so that ipc.watch long
// polls do not hold up the drain). It does not close the Store, which the
// caller owns.
func (n *Node) Close() error {
	n.wmu.Lock()
	if n.closed {
		n.wmu.Unlock()
		return nil
	}
	n.closed = true
	close(n.done)
	n.wmu.Unlock()
	n.stopLoop()
	<-n.loopDone
	<-n.followDone
	return nil
}

// Network returns the node's network name.
func (n *Node) Network() string { return n.cfg.Network }

// Version returns the current registry version (revision).
func (n *Node) Version() uint64 {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.state.Version
}

const (
	kindDescriptor = state.KindDescriptor
	kindLocal      = state.KindLocal
	kindMark       = state.KindMark
	kindNonce      = state.KindNonce
	kindCert       = state.KindCert
	kindCRL        = state.KindCRL
	kindWhy        = state.KindWhy
	kindMeta       = "meta"
)

type localRecord = state.LocalRecord

func (n *Node) load(ctx context.Context) error {
	now := n.cfg.Now()
	if err := n.loadTrust(ctx, now); err != nil {
		return err
	}
	meta, err := n.st.List(ctx, kindMeta, now)
	if err != nil {
		return fmt.Errorf("registry: load: %w", err)
	}
	for _, r := range meta {
		if r.Key == "version" {
			_ = json.Unmarshal(r.Value, &n.state.Version)
		}
	}
	for _, kind := range []string{kindMark, kindDescriptor, kindLocal} {
		rs, err := n.st.List(ctx, kind, now)
		if err != nil {
			return fmt.Errorf("registry: load: %w", err)
		}
		for _, err := range n.state.Restore(kind, rs) {
			n.log.Warn("registry: dropping an unreadable record", "err", err)
		}
	}
	return nil
}

// FindOptions narrow Find.
type FindOptions struct {
	// IncludeUntrusted also returns live entries the trust policy refuses,
	// with their verdict (for operators; discovery never uses it).
	IncludeUntrusted bool
	// Limit caps the result count; 0 means all.
	Limit int
}

// Find returns the live, trusted providers of an exact capability tag,
// newest registration first (the reference's order), ties by key.
func (n *Node) Find(capability string, opts FindOptions) []Entry {
	n.mu.RLock()
	out := make([]Entry, 0, n.state.Providers(capability))
	n.mu.RUnlock()
	n.FindFunc(capability, opts, func(e Entry) bool {
		out = append(out, e)
		return true
	})
	return out
}

// FindFunc is Find without the result slice: it calls fn with each
// provider in Find's order until fn returns false or opts.Limit is
// reached, and allocates nothing. fn runs under the registry's read lock:
// it must be quick and must not call back into the Node.
func (n *Node) FindFunc(capability string, opts FindOptions, fn func(Entry) bool) {
	now := n.cfg.Now()
	n.mu.RLock()
	defer n.mu.RUnlock()
	n.state.FindFunc(capability, now, opts.IncludeUntrusted, opts.Limit, fn)
}

// DescriptorWires returns the stored wire form of the live, trusted
// descriptor entries having capability (all when capability is empty), in
// discovery order: the bytes GET /agents serves, spliced as they are.
func (n *Node) DescriptorWires(capability string) [][]byte {
	now := n.cfg.Now()
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.state.DescriptorWires(capability, now)
}

// List returns every live entry (trusted only unless includeUntrusted).
func (n *Node) List(includeUntrusted bool) []Entry {
	now := n.cfg.Now()
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.state.List(now, includeUntrusted)
}

// Get returns the live entry with key (node public key or "local:name").
func (n *Node) Get(key string) (Entry, bool) {
	now := n.cfg.Now()
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.state.Get(key, now)
}

// Register admits a signed descriptor. The order of checks is: schema and
// signature (nothing else is read before the signature verifies), TTL
// window, network, policy cap, trust (key_compromise, enrolment), then
// anti-rollback. It returns the stored entry and whether it replaced one.
func (n *Node) Register(ctx context.Context, d *descriptor.Descriptor) (Entry, error) {
	raw, err := d.VerifyAndMarshal()
	if err != nil {
		return Entry{}, err
	}
	now := n.cfg.Now()
	if err := d.Live(now, n.cfg.Skew); err != nil {
		return Entry{}, err
	}
	if err := state.Fits(d, n.cfg.Network, n.cfg.MaxDescriptorTTL); err != nil {
		return Entry{}, err
	}
	if err := n.refuseSelf(d.Endpoint.URI()); err != nil {
		return Entry{}, err
	}
	if err := refuseForeignLocal(ctx, d.Endpoint.URI()); err != nil {
		return Entry{}, err
	}
	if n.shared != nil {
		return n.registerShared(ctx, raw, d, now)
	}
	n.wmu.Lock()
	defer n.wmu.Unlock()
	e, ops, ev, same, err := n.admitLocked(d, raw, now)
	if same != nil {
		return n.state.View(same, now), nil
	} else if err != nil {
		return Entry{}, err
	}
	if err := n.commit(ctx, ops, ev); err != nil {
		return Entry{}, err
	}
	n.publish(func() {
		n.state.Marks[e.Key] = e.RegisteredAt
		n.state.Index(e)
	})
	return n.state.View(e, now), nil
}

// admitLocked checks a verified descriptor against trust and the
// anti-rollback watermark and returns the entry, the writes and the event
// that admit it — or the current entry when it is the same descriptor
// again (idempotent): state.Admit, on an open node. The caller holds wmu.
func (n *Node) admitLocked(d *descriptor.Descriptor, raw []byte, now time.Time) (*entry, []Op, Event, *entry, error) {
	if n.closed {
		return nil, nil, Event{}, nil, errors.New("registry: closed")
	}
	return n.state.Admit(d, raw, now, n.cfg.Machine, n.cfg.Skew)
}

// deregisterLocked removes an entry by key and records why
// (EventDeregistered or EventRevoked); the caller holds wmu.
func (n *Node) deregisterLocked(ctx context.Context, key, kind, reason string) (bool, error) {
	e, ok := n.state.Lookup(key)
	if !ok {
		return false, nil
	}
	rk := kindDescriptor
	if e.Source == SourceLocal {
		rk = kindLocal
	}
	ev := state.EventOf(kind, e)
	ev.Key, ev.Reason = key, reason
	if err := n.commit(ctx, []Op{{Record: Record{Kind: rk, Key: key}, Delete: true}}, ev); err != nil {
		return false, err
	}
	n.publish(func() { n.state.Unindex(e) })
	return true, nil
}

// publish applies an in-memory change that is already durable, under the
// readers' lock; the caller holds wmu.
func (n *Node) publish(f func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f()
}

// commit writes ops plus the new version, then publishes the events; the
// caller holds wmu (not mu: readers go on during the Store write).
func (n *Node) commit(ctx context.Context, ops []Op, evs ...Event) error {
	if n.shared != nil {
		return n.commitShared(ctx, ops, evs)
	}
	next := n.state.Version + uint64(len(evs))
	vb, _ := json.Marshal(next)
	ops = append(ops, Op{Record: Record{Kind: kindMeta, Key: "version", Value: vb}})
	if err := n.st.Apply(ctx, ops...); err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.observeChanges(evs)
	n.state.Append(evs, n.cfg.Now())
	if len(evs) > 0 {
		n.wake()
	}
	return nil
}

// observeChanges tells the observer of evs.
func (n *Node) observeChanges(evs []Event) {
	if n.cfg.Observer != nil {
		for _, ev := range evs {
			n.cfg.Observer.OnChange(ev.Kind)
		}
	}
}

// wake wakes the pending watches; the caller holds mu.
func (n *Node) wake() {
	close(n.changed)
	n.changed = make(chan struct{})
}

func (n *Node) sweepLoop(ctx context.Context) {
	defer close(n.loopDone)
	t := time.NewTicker(n.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n.Sweep(ctx)
		}
	}
}

// Sweep drops expired entries (emitting "expired" events), forgets spent
// nonces and purges the store. The sweeper calls it every SweepInterval;
// reads are correct without it.
func (n *Node) Sweep(ctx context.Context) {
	now := n.cfg.Now()
	n.wmu.Lock()
	dead, lapsed := n.state.Expired(now)
	if gone := n.state.Trust.Lapsed(now); len(lapsed) > 0 || len(gone) > 0 {
		n.publish(func() {
			for _, id := range gone {
				n.state.Trust.Forget(id) // its record expires in the store
			}
			for _, e := range lapsed {
				n.state.RefreshVerdict(e, now)
			}
		})
	}
	if len(dead) > 0 && n.shared != nil {
		n.sweepShared(ctx, dead)
	} else if len(dead) > 0 {
		evs := make([]Event, 0, len(dead))
		for _, e := range dead {
			evs = append(evs, state.EventOf(EventExpired, e))
		}
		// The records expire in the store by themselves; only the version
		// and the events need writing.
		if err := n.commit(ctx, nil, evs...); err != nil {
			n.log.Warn("registry: sweep", "err", err)
		} else {
			n.publish(func() {
				for _, e := range dead {
					n.state.Unindex(e)
				}
			})
		}
	}
	n.state.ForgetNonces(now)
	n.wmu.Unlock()
	if n.shared != nil {
		return // the store's leases end expired records
	}
	if _, err := n.st.Purge(ctx, now); err != nil {
		n.log.Warn("registry: purge", "err", err)
	}
}

// useNonceLocked records a one-time value under scope until exp; false
// when it was already used. The caller holds wmu (nonces are writers'
// state only).
func (n *Node) useNonceLocked(ctx context.Context, scope, nonce string, exp time.Time) (bool, error) {
	k := scope + "\x00" + nonce
	if e, ok := n.state.Nonces[k]; ok && n.cfg.Now().Before(e) {
		return false, nil
	}
	if err := n.apply(ctx, Op{Record: Record{Kind: kindNonce, Key: k, Value: []byte{}, ExpiresAt: exp}}); err != nil {
		if refusal.Is(err, CodeWordConcurrentChange) {
			return false, nil // spent on another node
		}
		return false, err
	}
	n.state.Nonces[k] = exp
	return true, nil
}

func (n *Node) loadNonces(ctx context.Context, now time.Time) error {
	rs, err := n.st.List(ctx, kindNonce, now)
	if err != nil {
		return err
	}
	for _, r := range rs {
		n.state.Nonces[r.Key] = r.ExpiresAt
	}
	return nil
}

// Config returns the node's configuration, defaults filled in.
func (n *Node) Config() Config { return n.cfg }
