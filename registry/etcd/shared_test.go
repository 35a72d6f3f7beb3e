package etcd_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/etcd"
)

// deadline bounds what only takes long when something is wrong.
const deadline = 30 * time.Second

var quiet = slog.New(slog.DiscardHandler)

// peer is a member of a test fleet: a registry node on a shared store.
type peer struct {
	*registry.Node
	st *etcd.Store
}

// join starts a registry node on srv under prefix.
func join(t *testing.T, srv *etcdtest.Server, prefix string, opts etcd.Options) *peer {
	t.Helper()
	return joinVia(t, srv, prefix, opts, nil)
}

// joinVia is join with the node's store wrapped by wrap (nil: none).
func joinVia(t *testing.T, srv *etcdtest.Server, prefix string, opts etcd.Options, wrap func(*etcd.Store) registry.Store) *peer {
	t.Helper()
	opts.Endpoints, opts.Prefix, opts.Logger = srv.Endpoints(), prefix, quiet
	st, err := etcd.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	var rs registry.Store = st
	if wrap != nil {
		rs = wrap(st)
	}
	n, err := registry.NewNode(registry.Config{Store: rs, Logger: quiet, SweepInterval: 100 * time.Millisecond})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	p := &peer{Node: n, st: st}
	t.Cleanup(func() { p.Close(); _ = st.Close() })
	return p
}

// waitEvent watches p until an event of kind for key arrives and returns
// it; since is advanced.
func waitEvent(t *testing.T, p *peer, since *uint64, kind, key string) registry.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	for ctx.Err() == nil {
		rev, evs, err := p.Watch(ctx, *since, nil, deadline)
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		*since = rev
		for _, ev := range evs {
			if ev.Kind == kind && ev.Key == key {
				return ev
			}
		}
	}
	t.Fatalf("no %s event for %s within %s", kind, key, deadline)
	return registry.Event{}
}

func nodeKey(t *testing.T) (ed25519.PrivateKey, string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return priv, base64.StdEncoding.EncodeToString(pub)
}

func signedAt(t *testing.T, priv ed25519.PrivateKey, caps []string, reg time.Time, port int) *descriptor.Descriptor {
	t.Helper()
	d := descriptor.New("agent-1", "capmesh", priv.Public().(ed25519.PublicKey), caps, descriptor.Endpoint{Host: "127.0.0.1", Port: port, Scheme: "tcp"}, reg, time.Hour)
	if err := d.Sign(priv); err != nil {
		t.Fatal(err)
	}
	return d
}

func errWord(err error) string {
	var re *registry.Error
	if errors.As(err, &re) {
		return re.Code
	}
	return ""
}

// TestTwoNodesShareRegistrationsAndTrust: an enrolment and a signed
// registration made on one node are visible on the other (its own index,
// fed by the watch), at the same revision on both; a revocation on the
// second evicts on the first and refuses the key there afterwards.
func TestTwoNodesShareRegistrationsAndTrust(t *testing.T) {
	srv := etcdtest.Start(t)
	a := join(t, srv, "/fleet/", etcd.Options{})
	b := join(t, srv, "/fleet/", etcd.Options{})
	if a.AuthorityPublicKey() != b.AuthorityPublicKey() {
		t.Fatal("the nodes do not share the network authority")
	}
	ctx := context.Background()
	priv, key := nodeKey(t)
	if _, err := a.Enroll(ctx, key, nil, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	var sa, sb uint64 = a.Version(), b.Version()
	if _, err := a.Register(ctx, signedAt(t, priv, []string{"crypto.sign"}, time.Now(), 7001)); err != nil {
		t.Fatal(err)
	}
	evA := waitEvent(t, a, &sa, registry.EventRegistered, key)
	evB := waitEvent(t, b, &sb, registry.EventRegistered, key)
	if evA.Revision != evB.Revision || evA.Revision == 0 {
		t.Errorf("revisions differ: %d on a, %d on b", evA.Revision, evB.Revision)
	}
	got := b.Find("crypto.sign", registry.FindOptions{})
	if len(got) != 1 || got[0].Key != key || !got[0].Trust.Trusted {
		t.Fatalf("b finds %+v, want the registration trusted by the enrolment made on a", got)
	}

	res, err := b.Revoke(ctx, "", key, registry.ReasonKeyCompromise)
	if err != nil || res.CRLSequence != 1 {
		t.Fatalf("revoke on b: %+v, %v", res, err)
	}
	ev := waitEvent(t, a, &sa, registry.EventRevoked, key)
	if ev.Reason == "" {
		t.Error("the revoked event on a carries no reason")
	}
	if got := a.Find("crypto.sign", registry.FindOptions{IncludeUntrusted: true}); len(got) != 0 {
		t.Errorf("a still finds %+v after the revocation on b", got)
	}
	_, err = a.Register(ctx, signedAt(t, priv, []string{"crypto.sign"}, time.Now().Add(time.Second), 7001))
	if errWord(err) != descriptor.CodeKeyRevoked {
		t.Errorf("a registers a key compromised on b: %v", err)
	}
	crl, err := a.CurrentCRL(ctx)
	if err != nil || crl.Sequence != 1 {
		t.Errorf("a's CRL: %+v, %v; want b's sequence 1", crl, err)
	}
}

// TestRacingNodesCannotBothWin: two nodes register two different
// descriptors of one node key with the same registered_at at the same
// moment; the compare-and-swap on the record's revision lets exactly one
// win, and both nodes end with the winner's.
func TestRacingNodesCannotBothWin(t *testing.T) {
	srv := etcdtest.Start(t)
	a := join(t, srv, "/race/", etcd.Options{})
	b := join(t, srv, "/race/", etcd.Options{})
	ctx := context.Background()
	for round := range 15 {
		priv, key := nodeKey(t)
		if _, err := a.Enroll(ctx, key, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
		waitTrusted(t, b, key)
		at := time.Now()
		ds := []*descriptor.Descriptor{signedAt(t, priv, []string{"x.y"}, at, 8001), signedAt(t, priv, []string{"x.y"}, at, 8002)}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, p := range []*peer{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = p.Register(ctx, ds[i])
			}()
		}
		close(start)
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch w := errWord(err); {
			case err == nil:
				won++
			case w == registry.CodeWordConcurrentChange || w == registry.CodeWordReplay:
			default:
				t.Fatalf("round %d: node %d: unexpected error %v", round, i, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d nodes won the race (errors %v)", round, won, errs)
		}
		want := ds[0].Endpoint.URI()
		if errs[0] != nil {
			want = ds[1].Endpoint.URI()
		}
		for _, p := range []*peer{a, b} {
			waitFor(t, func() bool { e, ok := p.Get(key); return ok && e.Endpoint == want })
		}
	}
}

// deleteSigned asks p to delete key's registration, with the request
// signed by priv at at, as an agent deletes its own descriptor.
func deleteSigned(ctx context.Context, p *peer, priv ed25519.PrivateKey, key string, at time.Time) error {
	s := descriptor.TimeOf(at).String()
	sig := base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte("delete-agent|v1|"+key+"|"+s)))
	return p.DeleteSigned(ctx, key, "v1", s, sig)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("condition not reached within the deadline")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func waitTrusted(t *testing.T, p *peer, key string) {
	t.Helper()
	waitFor(t, func() bool {
		for _, c := range p.Certificates(key) {
			if c.Status == "issued" {
				return true
			}
		}
		return false
	})
}

// fakeHost serves identity.get as name on a Unix socket.
func fakeHost(t *testing.T, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cm-etcd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := filepath.Join(dir, name+".sock")
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	srv := jsonrpc.NewServer(jsonrpc.Map{
		"identity.get": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
			return map[string]string{"primal": name}, nil
		}),
	}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx, l) }()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

func localPeer() jsonrpc.Peer {
	return jsonrpc.Peer{Transport: "unix", HasCred: true, UID: uint32(os.Getuid()), PID: int32(os.Getpid())}
}

// TestKilledNodeLocalRegistrationsExpire: a local registration lives on
// its node's lease: the other node sees it (keyed by the owner), a
// heartbeat writes nothing to etcd, and when the owner is killed (no
// revocation, no more keep-alives) it vanishes everywhere with the lease.
func TestKilledNodeLocalRegistrationsExpire(t *testing.T) {
	srv := etcdtest.Start(t)
	a := join(t, srv, "/locals/", etcd.Options{NodeID: "node-a", NodeTTL: 2 * time.Second})
	b := join(t, srv, "/locals/", etcd.Options{NodeID: "node-b"})
	ctx := context.Background()
	sb := b.Version()
	if _, _, err := a.RegisterLocal(ctx, localPeer(), registry.LocalRegistration{Name: "beardog", Capabilities: []string{"crypto.sign"}, Endpoint: fakeHost(t, "beardog")}); err != nil {
		t.Fatal(err)
	}
	const remote = "local:beardog@node-a"
	waitEvent(t, b, &sb, registry.EventRegistered, remote)
	if got := b.Find("crypto.sign", registry.FindOptions{}); len(got) != 1 || got[0].Key != remote {
		t.Fatalf("b finds %+v", got)
	}
	before := srv.Revision(t)
	if _, err := a.Heartbeat(ctx, localPeer(), "beardog", ""); err != nil {
		t.Fatal(err)
	}
	if after := srv.Revision(t); after != before {
		t.Errorf("a heartbeat wrote to etcd (revision %d → %d)", before, after)
	}
	a.st.Kill()
	a.Close()
	ev := waitEvent(t, b, &sb, registry.EventExpired, remote)
	if ev.Name != "beardog" {
		t.Errorf("expired event %+v", ev)
	}
	if got := b.Find("crypto.sign", registry.FindOptions{}); len(got) != 0 {
		t.Errorf("b still finds %+v", got)
	}
}

// TestWatchRevisionsAcrossRestart: a watch cursor from one node is valid
// on a node started later (the history comes from etcd), with the same
// revisions; once etcd compacted it away it is CodeWordCompacted with the
// current revision.
func TestWatchRevisionsAcrossRestart(t *testing.T) {
	srv := etcdtest.Start(t)
	a := join(t, srv, "/restart/", etcd.Options{})
	ctx := context.Background()
	priv, key := nodeKey(t)
	if _, err := a.Enroll(ctx, key, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	sa := a.Version()
	if _, err := a.Register(ctx, signedAt(t, priv, []string{"k.v"}, time.Now(), 9001)); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, a, &sa, registry.EventRegistered, key)
	cursor := sa
	if _, err := a.Register(ctx, signedAt(t, priv, []string{"k.v"}, time.Now().Add(time.Second), 9002)); err != nil {
		t.Fatal(err)
	}
	second := waitEvent(t, a, &sa, registry.EventReplaced, key)

	b := join(t, srv, "/restart/", etcd.Options{}) // a node started after both
	rev, evs, err := b.Watch(ctx, cursor, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Revision != second.Revision || evs[0].Kind != registry.EventReplaced || evs[0].Endpoint != "tcp://127.0.0.1:9002" {
		t.Fatalf("b from cursor %d: %+v, want a's %+v", cursor, evs, second)
	}
	if rev < second.Revision {
		t.Errorf("b's revision %d is behind the event's %d", rev, second.Revision)
	}

	// One more change, then compaction at it: the cursor's next revision
	// is gone.
	sb := b.Version()
	if _, err := a.Register(ctx, signedAt(t, priv, []string{"k.v"}, time.Now().Add(2*time.Second), 9003)); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, b, &sb, registry.EventReplaced, key)
	srv.Compact(t)
	_, _, err = b.Watch(ctx, cursor, nil, 0)
	var re *registry.Error
	if !errors.As(err, &re) || re.Code != registry.CodeWordCompacted || re.RPC != registry.CodeCompacted {
		t.Fatalf("watch from a compacted cursor: %v", err)
	}
	if cur, _ := re.Details["revision"].(uint64); cur != b.Version() {
		t.Errorf("compacted error names revision %v, want the current %d", re.Details["revision"], b.Version())
	}
}

// TestUnreachableEtcd: with etcd down, a write fails with the retryable
// registry_store_unavailable and reads go on from the local index.
func TestUnreachableEtcd(t *testing.T) {
	srv := etcdtest.Start(t)
	a := join(t, srv, "/down/", etcd.Options{RequestTimeout: time.Second})
	ctx := context.Background()
	priv, key := nodeKey(t)
	if _, err := a.Enroll(ctx, key, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Register(ctx, signedAt(t, priv, []string{"k.v"}, time.Now(), 9001)); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	_, err := a.Register(ctx, signedAt(t, priv, []string{"k.v"}, time.Now().Add(time.Second), 9002))
	var re *registry.Error
	if !errors.As(err, &re) || re.Code != registry.CodeWordStoreUnavailable || re.RPC != registry.CodeUnavailable {
		t.Fatalf("register with etcd down: %v", err)
	}
	if got := a.Find("k.v", registry.FindOptions{}); len(got) != 1 || got[0].Endpoint != "tcp://127.0.0.1:9001" {
		t.Errorf("reads with etcd down: %+v", got)
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		_, err := a.Register(ctx, signedAt(t, priv, []string{"k.v"}, time.Now().Add(2*time.Second), 9003))
		return err == nil
	})
}

var _ = json.Marshal

// TestWatermarkOutlivesDeletion: on etcd a descriptor is its own
// anti-rollback watermark while it is stored; deleting it (or replacing it
// by one that expires sooner) leaves a watermark record, so that an older
// descriptor is refused as a rollback on every node, also on one started
// after the deletion.
func TestWatermarkOutlivesDeletion(t *testing.T) {
	srv := etcdtest.Start(t)
	a := join(t, srv, "/marks/", etcd.Options{})
	b := join(t, srv, "/marks/", etcd.Options{})
	ctx := context.Background()
	priv, key := nodeKey(t)
	if _, err := a.Enroll(ctx, key, nil, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	old := withTTL(t, priv, t0, time.Hour, 9001)
	if _, err := a.Register(ctx, old); err != nil {
		t.Fatal(err)
	}
	sb := b.Version()
	if _, err := a.Register(ctx, withTTL(t, priv, t0.Add(time.Second), 2*time.Hour, 9002)); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, b, &sb, registry.EventReplaced, key)
	if err := deleteSigned(ctx, a, priv, key, t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, b, &sb, registry.EventDeregistered, key)
	c := join(t, srv, "/marks/", etcd.Options{}) // knows only what etcd holds
	for name, p := range map[string]*peer{"a": a, "b": b, "c": c} {
		if _, err := p.Register(ctx, old); errWord(err) != descriptor.CodeRollback {
			t.Errorf("%s: the older descriptor after the deletion: %v, want %s", name, err, descriptor.CodeRollback)
		}
	}
}

func withTTL(t *testing.T, priv ed25519.PrivateKey, reg time.Time, ttl time.Duration, port int) *descriptor.Descriptor {
	t.Helper()
	d := descriptor.New("agent-1", "capmesh", priv.Public().(ed25519.PublicKey), []string{"k.v"}, descriptor.Endpoint{Host: "127.0.0.1", Port: port, Scheme: "tcp"}, reg, ttl)
	if err := d.Sign(priv); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestWatermarkWhenTTLShrinks: a descriptor that expires sooner than the
// one it replaces does not carry the watermark alone (the older one would
// outlive it): a watermark record is written with it, until the older
// one's expiry.
func TestWatermarkWhenTTLShrinks(t *testing.T) {
	srv := etcdtest.Start(t)
	a := join(t, srv, "/shrink/", etcd.Options{})
	ctx := context.Background()
	priv, key := nodeKey(t)
	if _, err := a.Enroll(ctx, key, nil, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	for i, ttl := range []time.Duration{2 * time.Hour, 3 * time.Hour} {
		if _, err := a.Register(ctx, withTTL(t, priv, t0.Add(time.Duration(i)*time.Second), ttl, 9001+i)); err != nil {
			t.Fatal(err)
		}
	}
	if marks, _ := a.st.List(ctx, "watermark", time.Now()); len(marks) != 0 {
		t.Fatalf("a longer-lived replacement wrote watermark records: %+v", marks)
	}
	if _, err := a.Register(ctx, withTTL(t, priv, t0.Add(2*time.Second), time.Hour, 9003)); err != nil {
		t.Fatal(err)
	}
	marks, err := a.st.List(ctx, "watermark", time.Now())
	if err != nil || len(marks) != 1 || marks[0].Key != key || marks[0].ExpiresAt.Before(t0.Add(time.Second+3*time.Hour)) {
		t.Fatalf("after a shorter-lived replacement: %+v, %v; want one watermark until the older expiry", marks, err)
	}
}

// TestClosedNodeLocalRegistrationsGoAtOnce: a node that stops cleanly
// revokes its lease, so its local registrations vanish everywhere at
// once, not after the lease's TTL (a minute here).
func TestClosedNodeLocalRegistrationsGoAtOnce(t *testing.T) {
	srv := etcdtest.Start(t)
	a := join(t, srv, "/close/", etcd.Options{NodeID: "node-a", NodeTTL: time.Minute})
	b := join(t, srv, "/close/", etcd.Options{NodeID: "node-b"})
	ctx := context.Background()
	sb := b.Version()
	if _, _, err := a.RegisterLocal(ctx, localPeer(), registry.LocalRegistration{Name: "songbird", Capabilities: []string{"net.discover"}, Endpoint: fakeHost(t, "songbird")}); err != nil {
		t.Fatal(err)
	}
	const remote = "local:songbird@node-a"
	waitEvent(t, b, &sb, registry.EventRegistered, remote)
	start := time.Now()
	a.Close()
	if err := a.st.Close(); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, b, &sb, registry.EventExpired, remote)
	if d := time.Since(start); d >= time.Minute {
		t.Errorf("gone after %s: the lease ran out instead of being revoked", d)
	}
}

// TestRouterLeavesOtherNodesLocals: a node whose router cannot reach
// another node's local registration does not drop it: the socket is on
// the owner's machine, which alone can tell that its host is gone.
func TestRouterLeavesOtherNodesLocals(t *testing.T) {
	srv := etcdtest.Start(t)
	a := join(t, srv, "/drop/", etcd.Options{NodeID: "node-a"})
	b := join(t, srv, "/drop/", etcd.Options{NodeID: "node-b"})
	ctx := context.Background()
	sb := b.Version()
	if _, _, err := a.RegisterLocal(ctx, localPeer(), registry.LocalRegistration{Name: "nestgate", Capabilities: []string{"storage.put"}, Endpoint: fakeHost(t, "nestgate")}); err != nil {
		t.Fatal(err)
	}
	const remote = "local:nestgate@node-a"
	waitEvent(t, b, &sb, registry.EventRegistered, remote)
	e, ok := b.Get(remote)
	if !ok {
		t.Fatal("b does not hold a's registration")
	}
	b.DropIfGone(ctx, e, syscall.ENOENT)
	if _, ok := b.Get(remote); !ok {
		t.Error("b dropped another node's local registration")
	}
	if _, ok := a.Get("local:nestgate"); !ok {
		t.Error("a lost its registration")
	}
}

// gated holds a store's feed until released: a node cut off from etcd's
// watch while the others go on.
type gated struct {
	*etcd.Store
	release chan struct{}
}

func (g *gated) Follow(ctx context.Context, after uint64, fn func([]registry.Change)) error {
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil
	}
	return g.Store.Follow(ctx, after, fn)
}

// TestResyncAfterCompaction: a node whose feed cursor etcd compacted
// away while it was cut off rebuilds its index from a new snapshot: what
// was registered meanwhile appears, what was deleted goes.
func TestResyncAfterCompaction(t *testing.T) {
	srv := etcdtest.Start(t)
	a := join(t, srv, "/resync/", etcd.Options{})
	ctx := context.Background()
	priv0, key0 := nodeKey(t)
	priv1, key1 := nodeKey(t)
	for _, k := range []string{key0, key1} {
		if _, err := a.Enroll(ctx, k, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	if _, err := a.Register(ctx, signedAt(t, priv0, []string{"old.cap"}, t0, 9001)); err != nil {
		t.Fatal(err)
	}
	st, err := etcd.Open(ctx, etcd.Options{Endpoints: srv.Endpoints(), Prefix: "/resync/", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	g := &gated{Store: st, release: make(chan struct{})}
	b, err := registry.NewNode(registry.Config{Store: g, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(); _ = st.Close() })
	if _, ok := b.Get(key0); !ok {
		t.Fatal("b did not load the first registration")
	}
	if err := deleteSigned(ctx, a, priv0, key0, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Register(ctx, signedAt(t, priv1, []string{"new.cap"}, t0, 9002)); err != nil {
		t.Fatal(err)
	}
	srv.Compact(t)
	close(g.release)
	waitFor(t, func() bool {
		_, gone := b.Get(key0)
		_, there := b.Get(key1)
		return !gone && there
	})
	if b.Version() < srv.Revision(t)-1 {
		t.Errorf("b's revision %d, etcd's %d", b.Version(), srv.Revision(t))
	}
}

// TestNodesStartingTogetherShareTheGenesis: nodes started at the same
// moment on an empty registry race to store the root and authority keys;
// one wins and every node uses its keys.
func TestNodesStartingTogetherShareTheGenesis(t *testing.T) {
	srv := etcdtest.Start(t)
	const n = 4
	peers := make([]*peer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			st, err := etcd.Open(context.Background(), etcd.Options{Endpoints: srv.Endpoints(), Prefix: "/together/", Logger: quiet})
			if err != nil {
				errs[i] = err
				return
			}
			node, err := registry.NewNode(registry.Config{Store: st, Logger: quiet})
			if err != nil {
				st.Close()
				errs[i] = err
				return
			}
			peers[i] = &peer{Node: node, st: st}
		}()
	}
	close(start)
	wg.Wait()
	for i, p := range peers {
		if p != nil {
			t.Cleanup(func() { p.Close(); _ = p.st.Close() })
		}
		if errs[i] != nil {
			t.Fatalf("node %d: %v", i, errs[i])
		}
	}
	for _, p := range peers[1:] {
		if p.RootPublicKey() != peers[0].RootPublicKey() || p.AuthorityPublicKey() != peers[0].AuthorityPublicKey() {
			t.Fatal("nodes started together serve different genesis keys")
		}
	}
}

// TestLapsedLocalRegistrationExpiresEverywhere: a local registration its
// host stops renewing outlives neither its TTL on its own node, which
// deletes it from etcd, nor on the others.
func TestLapsedLocalRegistrationExpiresEverywhere(t *testing.T) {
	srv := etcdtest.Start(t)
	st, err := etcd.Open(context.Background(), etcd.Options{Endpoints: srv.Endpoints(), Prefix: "/lapse/", NodeID: "node-a", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	n, err := registry.NewNode(registry.Config{Store: st, Logger: quiet, LocalTTL: time.Second, SweepInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	a := &peer{Node: n, st: st}
	t.Cleanup(func() { a.Close(); _ = st.Close() })
	b := join(t, srv, "/lapse/", etcd.Options{NodeID: "node-b"})
	ctx := context.Background()
	sa, sb := a.Version(), b.Version()
	if _, _, err := a.RegisterLocal(ctx, localPeer(), registry.LocalRegistration{Name: "toadstool", Capabilities: []string{"compute.run"}, Endpoint: fakeHost(t, "toadstool")}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, a, &sa, registry.EventExpired, "local:toadstool")
	waitEvent(t, b, &sb, registry.EventExpired, "local:toadstool@node-a")
	if recs, _ := st.List(ctx, "local", time.Now()); len(recs) != 0 {
		t.Errorf("the lapsed registration is still in etcd: %+v", recs)
	}
}
