package etcd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/registry/etcd"
)

// TestRegistrationRightAfterAnEnrolmentElsewhere: a key enrolled on node
// a registers at once through node b, whose feed has not delivered the
// enrolment yet (provisioning that enrols through one node while the
// agent registers through its own). Before, b refused it as without an
// active certificate — a refusal that reads as final. Now a node that
// finds a key untrusted first lets its feed catch up with etcd and checks
// again.
func TestRegistrationRightAfterAnEnrolmentElsewhere(t *testing.T) {
	srv := etcdtest.Start(t)
	a := join(t, srv, "/enrolled/", etcd.Options{})
	b, hb := joinHeld(t, srv, "/enrolled/")
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	priv, key := nodeKey(t)

	hb.feed.Lock() // b lags
	if _, err := a.Enroll(ctx, key, nil, time.Hour); err != nil {
		hb.feed.Unlock()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.Register(ctx, signedAt(t, priv, []string{"enrol.lag"}, time.Now(), 7120))
		done <- err
	}()
	select {
	case err := <-done: // b answered while its feed still lagged
		hb.feed.Unlock()
		t.Fatalf("b answered the registration without catching up with the enrolment: %v", err)
	case <-time.After(200 * time.Millisecond): // b waits for its feed
	}
	hb.feed.Unlock()
	if err := <-done; err != nil {
		t.Fatalf("registration right after an enrolment on another node: %v", err)
	}
	if _, ok := b.Get(key); !ok {
		t.Error("b does not hold the registration it admitted")
	}
}

// TestCaughtAfterWritesElsewhere: Caught returns once the feed has
// delivered etcd's current revision even when that revision holds no
// change of the registry (a write under another prefix, a node-id
// claim): etcd's progress report says so. Otherwise every refusal of an
// untrusted key would wait out the request timeout.
func TestCaughtAfterWritesElsewhere(t *testing.T) {
	srv := etcdtest.Start(t)
	a := join(t, srv, "/caught/", etcd.Options{})
	c, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: deadline})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	for i := range 3 {
		if _, err := c.Put(ctx, fmt.Sprintf("/elsewhere/%d", i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	// A progress report comes within milliseconds; only a Caught that
	// waits for an event that never comes runs into the deadline.
	if err := a.st.Caught(ctx); err != nil {
		t.Fatalf("Caught after writes outside the registry's prefix: %v", err)
	}
}
