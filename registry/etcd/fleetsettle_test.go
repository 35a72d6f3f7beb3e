package etcd_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/etcd"
)

// view is what a node answers about the fleet: every registration, trusted
// or not, with its endpoint and trust, and every certificate's status.
func view(p *peer) string {
	var out []string
	for _, e := range p.List(true) {
		out = append(out, fmt.Sprintf("%s %s %v", e.Key, e.Endpoint, e.Trust.Trusted))
	}
	for _, c := range p.Certificates("") {
		out = append(out, c.CertID+" "+c.Status)
	}
	slices.Sort(out)
	return fmt.Sprint(out)
}

// TestNodesAgreeAfterRacingChanges: three nodes change the registrations
// and the trust of a few keys at once — registrations, replacements,
// signed deletions, revocations and enrolments of the same keys — and
// once the dust settles every node, and a node started afterwards from
// etcd alone, answers the same.
func TestNodesAgreeAfterRacingChanges(t *testing.T) {
	srv := etcdtest.Start(t)
	peers := []*peer{
		join(t, srv, "/agree/", etcd.Options{}),
		join(t, srv, "/agree/", etcd.Options{}),
		join(t, srv, "/agree/", etcd.Options{}),
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	type key struct {
		priv ed25519.PrivateKey
		pub  string
	}
	keys := make([]key, 4)
	for i := range keys {
		keys[i].priv, keys[i].pub = nodeKey(t)
		if _, err := peers[0].Enroll(ctx, keys[i].pub, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, srv, peers...)
	var tick atomic.Int64
	var wg sync.WaitGroup
	for w, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := mrand.New(mrand.NewPCG(uint64(w), 1))
			for range 60 {
				k := keys[r.IntN(len(keys))]
				at := time.Now().Add(time.Duration(tick.Add(1)) * time.Millisecond)
				var err error
				switch op := r.IntN(10); {
				case op < 6:
					_, err = p.Register(ctx, signedAt(t, k.priv, []string{"agree.cap"}, at, 7000+w))
				case op < 8:
					err = deleteSigned(ctx, p, k.priv, k.pub, at)
				case op < 9:
					_, err = p.Revoke(ctx, "", k.pub, registry.ReasonSuperseded)
				default:
					_, err = p.Enroll(ctx, k.pub, nil, time.Hour)
				}
				if err != nil && ctx.Err() != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	settle(t, srv, peers...)
	late := join(t, srv, "/agree/", etcd.Options{})
	want := view(late)
	for i, p := range peers {
		if got := view(p); got != want {
			t.Errorf("node %d answers\n%s\na node started from etcd answers\n%s", i, got, want)
		}
	}
}
