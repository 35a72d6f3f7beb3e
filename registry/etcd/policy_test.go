package etcd_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/etcd"
	"github.com/capmesh/capmesh/registry/internal/pyjson"
)

// barrier lets its first want arrivals through together.
type barrier struct {
	mu   sync.Mutex
	left int
	all  chan struct{}
}

func newBarrier(want int) *barrier { return &barrier{left: want, all: make(chan struct{})} }

// arrive counts one arrival in and waits for the others until ctx ends.
func (b *barrier) arrive(ctx context.Context) error {
	b.mu.Lock()
	if b.left--; b.left == 0 {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the other nodes' read of the policy: %w", ctx.Err())
	}
}

// policyGate holds a node's first read of the stored policy manifest
// until every node of the barrier has made its own: all of them see the
// same store (no manifest yet) before any of them writes one.
type policyGate struct {
	*etcd.Store
	b    *barrier
	once sync.Once
}

func (g *policyGate) List(ctx context.Context, kind string, now time.Time) ([]registry.Record, error) {
	rs, err := g.Store.List(ctx, kind, now)
	if kind == "policy" {
		g.once.Do(func() {
			if berr := g.b.arrive(ctx); err == nil {
				err = berr
			}
		})
	}
	return rs, err
}

// manifest is p's policy manifest in its served (pyjson) form.
func manifest(p *peer) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	m, err := p.PolicyManifest(ctx)
	if err != nil {
		return "", fmt.Errorf("policy manifest: %w", err)
	}
	raw, err := pyjson.Marshal(m)
	return string(raw), err
}

// policyOf is manifest, failing t on an error.
func policyOf(t *testing.T, p *peer) string {
	t.Helper()
	raw, err := manifest(p)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestFleetServesOnePolicyManifest: two nodes of a fleet answering their
// first GET /policy at the same moment (in most rounds both read an empty
// store, or one holding an unreadable manifest, before either writes; in
// the others they just start together) serve one manifest, signed by the
// fleet's authority; so does a node started later, and a node restarted.
func TestFleetServesOnePolicyManifest(t *testing.T) {
	srv := etcdtest.Start(t)
	for round := range 9 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			policyRound(t, srv, fmt.Sprintf("/policy/%d/", round), round%3 != 2, round%3 == 1)
		})
	}
}

// policyRound is one round of TestFleetServesOnePolicyManifest on a
// fresh prefix: gated holds both nodes' reads until both have read,
// unreadable stores an unreadable manifest first.
func policyRound(t *testing.T, srv *etcdtest.Server, prefix string, gated, unreadable bool) {
	if unreadable {
		st, err := etcd.Open(context.Background(), etcd.Options{Endpoints: srv.Endpoints(), Prefix: prefix, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		err = st.Apply(context.Background(), registry.Op{Record: registry.Record{Kind: "policy", Key: "active", Value: []byte("{not json")}})
		_ = st.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	var gate func(*etcd.Store) registry.Store
	if gated {
		b := newBarrier(2)
		gate = func(st *etcd.Store) registry.Store { return &policyGate{Store: st, b: b} }
	}
	nodes := []*peer{joinVia(t, srv, prefix, etcd.Options{}, gate), joinVia(t, srv, prefix, etcd.Options{}, gate)}
	got := make([]string, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, p := range nodes {
		wg.Go(func() {
			<-start
			got[i], errs[i] = manifest(p)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	if got[0] != got[1] {
		t.Fatalf("two nodes of one fleet serve different policy manifests:\n%s\n%s", got[0], got[1])
	}
	checkPolicy(t, nodes[0], got[0])
	for i, p := range nodes {
		if again := policyOf(t, p); again != got[0] {
			t.Errorf("node %d now serves another manifest:\n%s\n%s", i, again, got[0])
		}
	}
	if later := policyOf(t, join(t, srv, prefix, etcd.Options{})); later != got[0] {
		t.Errorf("a node started later serves another manifest:\n%s\n%s", later, got[0])
	}
	nodes[0].Close()
	_ = nodes[0].st.Close()
	if restarted := policyOf(t, join(t, srv, prefix, etcd.Options{})); restarted != got[0] {
		t.Errorf("the manifest changed across a restart:\n%s\n%s", restarted, got[0])
	}
}

// checkPolicy checks that raw is a policy manifest signed by p's
// authority.
func checkPolicy(t *testing.T, p *peer, raw string) {
	t.Helper()
	v, err := pyjson.Decode([]byte(raw))
	m, ok := v.(map[string]any)
	if err != nil || !ok {
		t.Fatalf("manifest %s: %v", raw, err)
	}
	sigs, _ := m["signatures"].([]any)
	if len(sigs) != 1 {
		t.Fatalf("manifest %s: want one signature", raw)
	}
	s0, _ := sigs[0].(map[string]any)
	sig, _ := s0["sig"].(string)
	delete(m, "signatures")
	msg, err := pyjson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := descriptor.VerifySignature(p.AuthorityPublicKey(), msg, sig); err != nil {
		t.Errorf("manifest signature: %v", err)
	}
}
