package registry_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry/api"

	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
)

type obsRecorder struct {
	mu   sync.Mutex
	seen map[string]int
	hops []int
}

func (r *obsRecorder) add(k string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[k]++
}
func (r *obsRecorder) OnChange(kind string)       { r.add("change " + kind) }
func (r *obsRecorder) OnTrustChange(kind string)  { r.add("trust " + kind) }
func (r *obsRecorder) OnStoreError(op string)     { r.add("store " + op) }
func (r *obsRecorder) OnRateLimited(group string) { r.add("limited " + group) }
func (r *obsRecorder) OnRoute(outcome string, hops int) {
	r.add("route " + outcome)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hops = append(r.hops, hops)
}

// failingStore fails every operation while fail is set.
type failingStore struct {
	registry.Store
	fail atomic.Bool
}

var errStoreDown = errors.New("store down")

func (s *failingStore) Apply(ctx context.Context, ops ...registry.Op) error {
	if s.fail.Load() {
		return errStoreDown
	}
	return s.Store.Apply(ctx, ops...)
}

// TestObserverSeesChangesTrustRoutesAndStoreErrors: the registry tells
// its Observer of each committed change, each trust change (enroll,
// revoke), each routed call's outcome and each failed Store operation,
// and Size follows the registrations.
func TestObserverSeesChangesTrustRoutesAndStoreErrors(t *testing.T) {
	rec := &obsRecorder{seen: map[string]int{}}
	st := &failingStore{Store: registry.NewMemStore()}
	n := newNode(t, registry.Config{Network: "N", Store: st, Observer: rec})
	ctx := context.Background()
	_, a, _ := ed25519.GenerateKey(nil)
	keyA := base64.StdEncoding.EncodeToString(a.Public().(ed25519.PublicKey))
	if _, err := n.Enroll(ctx, keyA, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Register(ctx, signed(t, a, "N", []string{"llm:chat"}, time.Now(), time.Hour)); err != nil {
		t.Fatal(err)
	}
	if s := n.Size(); s.Entries != 1 || s.Capabilities == 0 || s.Revision == 0 {
		t.Errorf("size after a registration: %+v", s)
	}
	if _, err := n.Revoke(ctx, "", keyA, registry.ReasonSuperseded); err != nil {
		t.Fatal(err)
	}
	if s := n.Size(); s.Entries != 0 {
		t.Errorf("size after the revocation: %+v", s)
	}
	h := api.RPC(n).Assign(ctx, "zz.op")
	if h == nil {
		t.Fatal("the router does not take zz.op")
	}
	if _, err := h.Handle(ctx, &jsonrpc.Request{Method: "zz.op", ID: []byte("1")}); err == nil {
		t.Fatal("a call without a provider was answered")
	}
	st.fail.Store(true)
	_, b, _ := ed25519.GenerateKey(nil)
	if _, err := n.Enroll(ctx, base64.StdEncoding.EncodeToString(b.Public().(ed25519.PublicKey)), nil, time.Hour); !errors.Is(err, errStoreDown) {
		t.Fatalf("enroll with the store down: %v", err)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	for k, want := range map[string]int{
		"trust enrolled": 1, "trust revoked": 1,
		"change registered": 1, "change revoked": 1,
		"route no_provider": 1, "store apply": 1,
	} {
		if rec.seen[k] != want {
			t.Errorf("%s: %d, want %d (all %v)", k, rec.seen[k], want, rec.seen)
		}
	}
	if len(rec.hops) != 1 || rec.hops[0] != 0 {
		t.Errorf("hops of an unforwarded call: %v, want [0]", rec.hops)
	}
}

// TestObserverSeesRateLimits: a write refused by a per-client rate limit
// is reported with its group; a group without a limit reports nothing.
func TestObserverSeesRateLimits(t *testing.T) {
	rec := &obsRecorder{seen: map[string]int{}}
	n := newNode(t, registry.Config{SweepInterval: time.Hour, Observer: rec, RateLimits: registry.RateLimits{
		Agents: registry.RateLimit{PerMinute: 1, Burst: 1}, Admin: registry.RateLimit{PerMinute: -1}}})
	srv := httptest.NewServer(api.HTTPHandler(n))
	defer srv.Close()
	c := clientFrom("127.0.0.1")
	for range 3 {
		post(t, c, srv.URL+"/agents")
		post(t, c, srv.URL+"/admin/invite")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.seen["limited agents"] != 2 || rec.seen["limited admin"] != 0 {
		t.Errorf("rate limited: %v, want agents 2, admin 0", rec.seen)
	}
}
