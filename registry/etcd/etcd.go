// Package etcd is the registry's shared store on etcd
// (go.etcd.io/etcd/client/v3): several capmesh nodes on one etcd cluster
// share one registry. It implements registry.SharedStore.
//
// Layout: every record is one key, <prefix><kind>/<key>, whose value is
// the record's expiry (8 bytes, big-endian Unix nanoseconds, 0 for none)
// followed by its value; a record that names the machine that admitted
// it (registry.Record.Machine) sets the top bit of those 8 bytes and
// puts the machine (a length byte, then its bytes) before the value. Local registrations are <prefix>local/<node>/<key>:
// they belong to the node that made them. Expiry is etcd's: a record with
// an expiry is attached to a lease that ends at or shortly after it
// (leases are shared by records expiring in the same 10 s bucket), so no
// sweeper deletes anything; List still hides a record from its exact
// expiry on. Local registrations are attached instead to the one lease of
// their node, which the node keeps alive while it runs and revokes on
// Close: a killed node's registrations vanish when its lease runs out.
//
// Writes are single transactions; ApplyIf adds compare-and-swap on the
// mod revisions of records. Revisions are etcd revisions.
//
// Connection: plaintext (etcd://) on loopback only; beyond it TLS
// (etcds://) with the node authenticated by a client certificate or
// etcd's user and password, unless Options.Insecure (secure.go,
// ParseURL).
package etcd

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/capmesh/capmesh/registry"
)

// Options configure Open.
type Options struct {
	// Endpoints are etcd client endpoints (host:port or http://host:port).
	Endpoints []string
	// Prefix is the key prefix of this registry's records. Default
	// "/capmesh/registry/". Every node of one registry uses the same.
	Prefix string
	// NodeID names this node among the writers; its local registrations
	// are kept under it. Default: random, per Open.
	NodeID string
	// NodeTTL is the lifetime of the node's lease without keep-alives: how
	// long a killed node's local registrations outlive it. Default 10 s.
	NodeTTL time.Duration
	// TLS connects over TLS (etcds://), verifying the servers against
	// CAFile, or the system's roots when CAFile is empty.
	TLS bool
	// CAFile is a PEM file of the certificate authorities that sign the
	// etcd servers' certificates (TLS only).
	CAFile string
	// CertFile and KeyFile are PEM files of the node's client certificate
	// and its key, for etcd's --client-cert-auth (TLS only; both or
	// neither).
	CertFile, KeyFile string
	// Username authenticates the node to etcd's authentication (etcdctl
	// user add), with Password, else the first line of PasswordFile, else
	// the environment variable EnvPassword.
	Username, Password, PasswordFile string
	// Insecure allows what Open refuses otherwise beyond loopback: a
	// plaintext connection to an etcd endpoint that is not a loopback
	// address or localhost, or TLS without a client certificate or a
	// user. Default false: the node never sends unauthenticated
	// traffic beyond loopback unless told.
	Insecure bool
	// DialTimeout bounds connecting; RequestTimeout bounds each request
	// whose context has no deadline. Defaults 5 s.
	DialTimeout    time.Duration
	RequestTimeout time.Duration
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Store is a registry.SharedStore on etcd.
type Store struct {
	c       *clientv3.Client
	opts    Options
	log     *slog.Logger
	ctx     context.Context // ends at Close
	cancel  context.CancelFunc
	kaDone  chan struct{}
	batch   batcher
	mu      sync.Mutex
	node    clientv3.LeaseID           // the node's lease
	buckets map[int64]clientv3.LeaseID // expiry bucket (Unix s) → lease
	closed  bool
	// fed is the revision up to which Follow has delivered every change
	// (its events, and etcd's progress reports).
	fed atomic.Uint64
	// asked is when Caught last asked etcd for a progress report (Unix
	// ns): one request serves every waiter, so a flood of refusals asks
	// at most every 10 ms.
	asked atomic.Int64
}

var _ registry.SharedStore = (*Store)(nil)

type mvccKV = mvccpb.KeyValue

// quietLogger keeps the client's own retry chatter out of the node's
// log; the store reports what matters through Options.Logger.
func quietLogger() *zap.Logger { return zap.NewNop() }

// bucket is the granularity of expiry leases.
const bucket = 10 * time.Second

// maxOpsPerTxn is etcd's default --max-txn-ops.
const maxOpsPerTxn = 128

// Open connects to etcd and grants the node's lease. It fails with
// registry.ErrUnavailable when etcd cannot be reached.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if len(opts.Endpoints) == 0 {
		return nil, errors.New("registry/etcd: no endpoints")
	}
	if opts.Prefix == "" {
		opts.Prefix = "/capmesh/registry/"
	}
	if !strings.HasSuffix(opts.Prefix, "/") {
		opts.Prefix += "/"
	}
	if opts.NodeID == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		opts.NodeID = hex.EncodeToString(b[:])
	}
	if strings.ContainsAny(opts.NodeID, "/@") {
		return nil, fmt.Errorf("registry/etcd: node id %q may not contain / or @", opts.NodeID)
	}
	if opts.NodeTTL <= 0 {
		opts.NodeTTL = 10 * time.Second
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 5 * time.Second
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	ccfg, err := opts.clientConfig()
	if err != nil {
		return nil, err
	}
	c, err := clientv3.New(ccfg)
	if refused(err) {
		return nil, fmt.Errorf("registry/etcd: etcd refused the node's credentials (user %q): %w", opts.Username, err)
	} else if err != nil {
		return nil, fmt.Errorf("registry/etcd: %w: %w", registry.ErrUnavailable, err)
	}
	s := &Store{c: c, opts: opts, log: opts.Logger, buckets: map[int64]clientv3.LeaseID{}, kaDone: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	gctx, cancel := s.reqCtx(ctx)
	defer cancel()
	lease, err := c.Grant(gctx, ttlSeconds(opts.NodeTTL))
	if err != nil {
		s.cancel()
		c.Close()
		return nil, s.wrap("grant the node lease", err)
	}
	s.node = lease.ID
	go s.keepAlive() // the claim may wait longer than the lease's TTL
	if err := s.claim(ctx, lease.ID); err != nil {
		s.cancel()
		<-s.kaDone
		rctx, cancel := context.WithTimeout(context.Background(), opts.RequestTimeout)
		_, _ = c.Revoke(rctx, lease.ID)
		cancel()
		c.Close()
		return nil, err
	}
	s.batch.start(s)
	return s, nil
}

// kindNode is the kind of the record that holds a node id for the node
// running under it; it is no record of the registry's.
const kindNode = "node"

// ErrNodeIDInUse is Open's error when another running node holds the
// node id.
var ErrNodeIDInUse = errors.New("registry/etcd: the node id is in use by another running node")

// claim takes the node id for the node's lease: a record under it that
// exists only while no other node holds it. Two nodes of one id would
// take each other's local registrations for their own (and sweep them,
// having no heartbeats of them). A node killed holds its id until its
// lease runs out, so claim waits that long (NodeTTL) before refusing.
func (s *Store) claim(ctx context.Context, lease clientv3.LeaseID) error {
	k := s.opts.Prefix + kindNode + "/" + s.opts.NodeID
	wait := time.NewTimer(s.opts.NodeTTL + 2*time.Second)
	defer wait.Stop()
	waited := false
	for {
		rctx, cancel := s.reqCtx(ctx)
		resp, err := s.c.Txn(rctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).Then(clientv3.OpPut(k, "", clientv3.WithLease(lease))).Commit()
		cancel()
		if err != nil {
			return s.wrap("claim the node id", err)
		}
		if resp.Succeeded {
			return nil
		}
		if !waited {
			waited = true
			s.log.Info("registry/etcd: the node id is held by another lease (a killed node holds it until its node_ttl runs out); waiting", "node_id", s.opts.NodeID, "up_to", s.opts.NodeTTL+2*time.Second)
		}
		select {
		case <-wait.C:
			return fmt.Errorf("%w: %q (every node of a registry needs its own node=)", ErrNodeIDInUse, s.opts.NodeID)
		case <-ctx.Done():
			return fmt.Errorf("%w: %q: %w", ErrNodeIDInUse, s.opts.NodeID, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// NodeID implements registry.SharedStore.
func (s *Store) NodeID() string { return s.opts.NodeID }

// Client is the etcd client (for benchmarks and tests on the same etcd).
func (s *Store) Client() *clientv3.Client { return s.c }

// keepAlive keeps the node's lease alive until Close; a lease lost (etcd
// away longer than NodeTTL) is replaced by a new one for later writes —
// the registrations attached to the old one are gone, and every node's
// feed reports them expired.
func (s *Store) keepAlive() {
	defer close(s.kaDone)
	for s.ctx.Err() == nil {
		s.mu.Lock()
		id := s.node
		s.mu.Unlock()
		ch, err := s.c.KeepAlive(s.ctx, id)
		if err == nil {
			for range ch {
			}
		}
		if s.ctx.Err() != nil {
			return
		}
		s.log.Warn("registry/etcd: the node lease was lost; local registrations of this node are gone", "err", err)
		for s.ctx.Err() == nil {
			gctx, cancel := context.WithTimeout(s.ctx, s.opts.RequestTimeout)
			l, err := s.c.Grant(gctx, ttlSeconds(s.opts.NodeTTL))
			cancel()
			if err == nil {
				s.mu.Lock()
				s.node = l.ID
				s.mu.Unlock()
				if err := s.claim(s.ctx, l.ID); err != nil {
					s.log.Error("registry/etcd: the node id could not be claimed again", "err", err)
				}
				break
			}
			select {
			case <-s.ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

func ttlSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, 2)
}

// refused reports whether err is etcd refusing the client's
// credentials or permissions: not an outage, no use retrying.
func refused(err error) bool {
	return errors.Is(err, rpctypes.ErrAuthFailed) || errors.Is(err, rpctypes.ErrPermissionDenied) ||
		status.Code(err) == codes.Unauthenticated || status.Code(err) == codes.PermissionDenied
}

// reqCtx bounds a request by RequestTimeout unless ctx has a deadline.
func (s *Store) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, s.opts.RequestTimeout)
}

// wrap marks errors of an unreachable etcd as registry.ErrUnavailable.
func (s *Store) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("registry/etcd: %s: %w", what, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, rpctypes.ErrNoLeader) || errors.Is(err, rpctypes.ErrTimeout) ||
		status.Code(err) == codes.Unavailable || status.Code(err) == codes.DeadlineExceeded {
		return fmt.Errorf("registry/etcd: %s: %w: %v", what, registry.ErrUnavailable, err)
	}
	return fmt.Errorf("registry/etcd: %s: %w", what, err)
}

// key is the etcd key of (kind, key).
func (s *Store) key(kind, key string) string {
	if kind == "local" {
		return s.opts.Prefix + "local/" + s.opts.NodeID + "/" + key
	}
	return s.opts.Prefix + kind + "/" + key
}

// parseKey splits an etcd key of this store into kind, key and (for a
// local registration) its node.
func (s *Store) parseKey(k string) (kind, key, node string, ok bool) {
	rest, ok := strings.CutPrefix(k, s.opts.Prefix)
	if !ok {
		return "", "", "", false
	}
	kind, rest, ok = strings.Cut(rest, "/")
	if !ok || kind == kindNode {
		return "", "", "", false
	}
	if kind == "local" {
		node, rest, ok = strings.Cut(rest, "/")
	}
	return kind, rest, node, ok
}

// withMachine, set in a value's first 8 bytes, says that the record's
// machine (registry.Record.Machine) follows them: one length byte and
// the machine's identity, before the record's value. Only records that
// name a machine carry it, so every other value is framed as before; a
// node that predates it reads such a record as expired long ago and
// unreadable, and so never dials its local-only endpoint.
const withMachine = 1 << 63

// maxMachine is the longest machine identity a value can carry.
const maxMachine = 255

// maxExpiry is the latest expiry a value's header holds: Unix
// nanoseconds in 63 bits (the top one is withMachine), in the year 2262.
// A later expiry is stored as maxExpiry (clampExpiry): time.UnixNano
// overflows past it, and the record would read back as expired in 1970.
var maxExpiry = time.Unix(0, math.MaxInt64&^withMachine).UTC()

// clampExpiry is t, or maxExpiry when t is later: such a record lives
// until then (centuries: for a registry, never), not until 1970.
func clampExpiry(t time.Time) time.Time {
	if t.After(maxExpiry) {
		return maxExpiry
	}
	return t
}

func encode(r registry.Record) (string, error) {
	if len(r.Machine) > maxMachine {
		return "", fmt.Errorf("registry/etcd: machine identity of %d bytes: at most %d", len(r.Machine), maxMachine)
	}
	b := make([]byte, 8, 9+len(r.Machine)+len(r.Value))
	var head uint64
	if !r.ExpiresAt.IsZero() {
		head = uint64(max(clampExpiry(r.ExpiresAt).UnixNano(), 1)) // before 1970: expired all the same
	}
	if r.Machine != "" {
		head |= withMachine
		b = append(append(b, byte(len(r.Machine))), r.Machine...)
	}
	binary.BigEndian.PutUint64(b, head)
	return string(append(b, r.Value...)), nil
}

func decode(v []byte) (registry.Record, bool) {
	if len(v) < 8 {
		return registry.Record{}, false
	}
	head, rest := binary.BigEndian.Uint64(v[:8]), v[8:]
	var r registry.Record
	if head&withMachine != 0 {
		if len(rest) == 0 || len(rest) < 1+int(rest[0]) || rest[0] == 0 {
			return registry.Record{}, false
		}
		r.Machine, rest = string(rest[1:1+int(rest[0])]), rest[1+int(rest[0]):]
		head &^= withMachine
	}
	r.Value = append([]byte{}, rest...)
	if head != 0 {
		r.ExpiresAt = time.Unix(0, int64(head)).UTC()
	}
	return r, true
}

// leaseFor is the lease a put of r is attached to: the node's for a local
// registration, an expiry bucket's for a record with an expiry, none
// otherwise.
func (s *Store) leaseFor(ctx context.Context, r registry.Record) (clientv3.LeaseID, error) {
	if r.Kind == "local" {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.node, nil
	}
	if r.ExpiresAt.IsZero() {
		return clientv3.NoLease, nil
	}
	now := time.Now()
	// Never before the record's expiry, and at least a few seconds out so
	// that the put lands before the lease ends.
	at := clampExpiry(r.ExpiresAt)
	if min := now.Add(5 * time.Second); at.Before(min) {
		at = min
	}
	b := at.Add(bucket - 1).Truncate(bucket).Unix()
	s.mu.Lock()
	id, ok := s.buckets[b]
	for k := range s.buckets {
		if k < now.Unix() {
			delete(s.buckets, k)
		}
	}
	s.mu.Unlock()
	if ok {
		return id, nil
	}
	rctx, cancel := s.reqCtx(ctx) // only here: most puts find their lease
	defer cancel()
	l, err := s.c.Grant(rctx, b-now.Unix()+1)
	if err != nil {
		return 0, s.wrap("grant an expiry lease", err)
	}
	s.mu.Lock()
	s.buckets[b] = l.ID
	s.mu.Unlock()
	return l.ID, nil
}

// Apply implements registry.Store.
func (s *Store) Apply(ctx context.Context, ops ...registry.Op) error {
	_, err := s.ApplyIf(ctx, nil, ops...)
	return err
}

// ApplyIf implements registry.SharedStore. Several ops on one key
// collapse to the last (the net effect of applying them in order), as one
// etcd transaction may not name a key twice. Concurrent calls share
// transactions (group commit, batch.go).
func (s *Store) ApplyIf(ctx context.Context, conds []registry.Cond, ops ...registry.Op) (uint64, error) {
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		req, err := s.request(ctx, conds, ops)
		if err != nil {
			return 0, err
		}
		rev, err := s.submit(ctx, req)
		if err != nil && errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 0 {
			// An expiry lease ended under us (etcd's clock ran ahead):
			// drop the cached leases and try once more.
			s.mu.Lock()
			clear(s.buckets)
			s.mu.Unlock()
			continue
		}
		if err != nil && errors.Is(err, rpctypes.ErrLeaseNotFound) {
			// The node's lease, lost while etcd was away: keepAlive grants
			// a new one.
			return 0, fmt.Errorf("registry/etcd: write: %w: the node's lease ended and is being replaced: %v", registry.ErrUnavailable, err)
		}
		return rev, err
	}
}

// request builds the transaction parts of one ApplyIf.
func (s *Store) request(ctx context.Context, conds []registry.Cond, ops []registry.Op) (*pending, error) {
	last := map[string]int{}
	for i, op := range ops {
		last[s.key(op.Kind, op.Key)] = i
	}
	if len(last)+len(conds) > maxOpsPerTxn {
		return nil, fmt.Errorf("registry/etcd: %d writes in one transaction; etcd takes at most %d", len(last), maxOpsPerTxn)
	}
	p := &pending{keys: map[string]bool{}, done: make(chan result, 1)}
	for _, c := range conds {
		k := s.key(c.Kind, c.Key)
		p.keys[k], p.size = true, p.size+len(k)
		if c.Present {
			p.cmps = append(p.cmps, clientv3.Compare(clientv3.CreateRevision(k), ">", 0))
		} else {
			p.cmps = append(p.cmps, clientv3.Compare(clientv3.ModRevision(k), "=", int64(c.Rev)))
		}
	}
	for i, op := range ops {
		k := s.key(op.Kind, op.Key)
		if last[k] != i {
			continue
		}
		p.keys[k], p.size = true, p.size+len(k)
		if op.Delete {
			p.ops = append(p.ops, clientv3.OpDelete(k))
			continue
		}
		lease, err := s.leaseFor(ctx, op.Record)
		if err != nil {
			return nil, err
		}
		v, err := encode(op.Record)
		if err != nil {
			return nil, err
		}
		p.ops, p.size = append(p.ops, clientv3.OpPut(k, v, clientv3.WithLease(lease))), p.size+len(v)
	}
	return p, nil
}

// List implements registry.Store: the records of kind not expired at now
// (for kind "local", this node's), in key order.
func (s *Store) List(ctx context.Context, kind string, now time.Time) ([]registry.Record, error) {
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	p := s.key(kind, "")
	resp, err := s.c.Get(rctx, p, clientv3.WithPrefix())
	if err != nil {
		return nil, s.wrap("list", err)
	}
	var out []registry.Record
	for _, kv := range resp.Kvs {
		r, ok := decode(kv.Value)
		if !ok || (!r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)) {
			continue
		}
		r.Kind, r.Key = kind, strings.TrimPrefix(string(kv.Key), p)
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b registry.Record) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Purge implements registry.Store. Leases delete expired records by
// themselves; Purge deletes those already expired at now that a lease has
// not ended yet (a record is deleted only if unchanged since it was read).
func (s *Store) Purge(ctx context.Context, now time.Time) (int, error) {
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	resp, err := s.c.Get(rctx, s.opts.Prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, s.wrap("purge", err)
	}
	n := 0
	for _, kv := range resp.Kvs {
		r, ok := decode(kv.Value)
		if !ok || r.ExpiresAt.IsZero() || now.Before(r.ExpiresAt) {
			continue
		}
		k := string(kv.Key)
		t, err := s.c.Txn(rctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", kv.ModRevision)).Then(clientv3.OpDelete(k)).Commit()
		if err != nil {
			return n, s.wrap("purge", err)
		}
		if t.Succeeded {
			n++
		}
	}
	return n, nil
}

// Snapshot implements registry.SharedStore, reading in pages at one
// revision.
func (s *Store) Snapshot(ctx context.Context) (uint64, []registry.Change, error) {
	const page = 1000
	var out []registry.Change
	var rev int64
	from, end := s.opts.Prefix, clientv3.GetPrefixRangeEnd(s.opts.Prefix)
	for {
		rctx, cancel := s.reqCtx(ctx)
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(page)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.c.Get(rctx, from, opts...)
		cancel()
		if err != nil {
			return 0, nil, s.wrap("snapshot", err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			if ch, ok := s.change(kv, false, nil); ok {
				out = append(out, ch)
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return uint64(rev), out, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// change converts one key-value (a put, or a delete at rev) of this
// store's prefix.
func (s *Store) change(kv *mvccKV, del bool, prev *mvccKV) (registry.Change, bool) {
	kind, key, node, ok := s.parseKey(string(kv.Key))
	if !ok {
		return registry.Change{}, false
	}
	ch := registry.Change{Revision: uint64(kv.ModRevision), Node: node}
	ch.Kind, ch.Key, ch.Delete = kind, key, del
	if !del {
		r, ok := decode(kv.Value)
		if !ok {
			return registry.Change{}, false
		}
		ch.Value, ch.ExpiresAt, ch.Machine = r.Value, r.ExpiresAt, r.Machine
		ch.Created = kv.Version == 1
	}
	if prev != nil {
		if r, ok := decode(prev.Value); ok {
			r.Kind, r.Key = kind, key
			ch.Prev = &r
		}
	}
	return ch, true
}

// Follow implements registry.SharedStore with an etcd watch from after+1.
// It asks for no previous values (each costs etcd a read): the node has
// them in its index.
func (s *Store) Follow(ctx context.Context, after uint64, fn func([]registry.Change)) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := s.c.Watch(wctx, s.opts.Prefix, clientv3.WithPrefix(), clientv3.WithRev(int64(after)+1))
	for resp := range wch {
		if resp.CompactRevision != 0 {
			return fmt.Errorf("registry/etcd: follow from %d: %w (oldest kept: %d)", after, registry.ErrCompacted, resp.CompactRevision)
		}
		if err := resp.Err(); err != nil {
			return s.wrap("follow", err)
		}
		for _, batch := range s.byRevision(resp.Events) {
			fn(batch)
			after = batch[0].Revision
		}
		s.delivered(resp)
	}
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("registry/etcd: follow: %w: the watch ended", registry.ErrUnavailable)
}

// delivered records that Follow has delivered what resp covers: its
// events (some of which are no registry change), or, for a progress
// report, every revision up to its header's.
func (s *Store) delivered(resp clientv3.WatchResponse) {
	rev := uint64(resp.Header.Revision)
	if n := len(resp.Events); n > 0 {
		rev = uint64(resp.Events[n-1].Kv.ModRevision)
	} else if !resp.IsProgressNotify() {
		return
	}
	if rev > s.fed.Load() { // one Follow runs at a time: its only writer
		s.fed.Store(rev)
	}
}

// Caught implements registry.SharedStore: it reads etcd's current
// revision and waits until Follow has delivered it, asking etcd for
// progress reports meanwhile (writes elsewhere in etcd, and the node-id
// claims, raise the revision without a change for the feed).
func (s *Store) Caught(ctx context.Context) error {
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	resp, err := s.c.Get(rctx, s.opts.Prefix+kindNode, clientv3.WithCountOnly())
	if err != nil {
		return s.wrap("catch up", err)
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for s.fed.Load() < uint64(resp.Header.Revision) {
		if last, now := s.asked.Load(), time.Now().UnixNano(); now-last >= int64(10*time.Millisecond) && s.asked.CompareAndSwap(last, now) {
			_ = s.c.RequestProgress(clientv3.WithRequireLeader(rctx))
		}
		select {
		case <-tick.C:
		case <-rctx.Done():
			return s.wrap("catch up", rctx.Err())
		}
	}
	return nil
}

// byRevision converts watch events, grouped by revision (etcd delivers a
// revision's events together, in order).
func (s *Store) byRevision(evs []*clientv3.Event) [][]registry.Change {
	var out [][]registry.Change
	for _, ev := range evs {
		ch, ok := s.change(ev.Kv, ev.Type == clientv3.EventTypeDelete, ev.PrevKv)
		if !ok {
			continue
		}
		if n := len(out); n > 0 && out[n-1][0].Revision == ch.Revision {
			out[n-1] = append(out[n-1], ch)
		} else {
			out = append(out, []registry.Change{ch})
		}
	}
	return out
}

// History implements registry.SharedStore: a watch from after+1, read
// until a revision past upto or a progress report at upto or later.
func (s *Store) History(ctx context.Context, after, upto uint64) ([]registry.Change, error) {
	if after >= upto {
		return nil, nil
	}
	hctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), 30*time.Second)
	defer cancel()
	wch := s.c.Watch(hctx, s.opts.Prefix, clientv3.WithPrefix(), clientv3.WithRev(int64(after)+1), clientv3.WithPrevKV(), clientv3.WithProgressNotify())
	var out []registry.Change
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case resp, ok := <-wch:
			if !ok {
				return nil, s.wrap("history", hctx.Err())
			}
			if resp.CompactRevision != 0 {
				return nil, fmt.Errorf("registry/etcd: history from %d: %w", after, registry.ErrCompacted)
			}
			if err := resp.Err(); err != nil {
				return nil, s.wrap("history", err)
			}
			for _, batch := range s.byRevision(resp.Events) {
				if batch[0].Revision > upto {
					return out, nil
				}
				out = append(out, batch...)
				if batch[0].Revision == upto {
					return out, nil
				}
			}
			// Events that are no registry change (a node's id claim) end
			// the history as well once they reach upto.
			if n := len(resp.Events); n > 0 && uint64(resp.Events[n-1].Kv.ModRevision) >= upto {
				return out, nil
			}
			if resp.IsProgressNotify() && uint64(resp.Header.Revision) >= upto {
				return out, nil
			}
		case <-tick.C:
			_ = s.c.RequestProgress(hctx)
		}
	}
}

// Close revokes the node's lease (its local registrations go at once)
// and closes the client.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errors.New("registry/etcd: already closed")
	}
	s.closed = true
	id := s.node
	s.mu.Unlock()
	s.cancel()
	<-s.kaDone
	s.batch.wait()
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.RequestTimeout)
	defer cancel()
	_, err := s.c.Revoke(ctx, id)
	if cerr := s.c.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return s.wrap("close", err)
	}
	return nil
}
