package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/registry"
)

// noneHolds fails unless no peer holds a registration of key, trusted or
// not, and, unless the key was compromised, none serves one once the key
// is enrolled again (a registration that survived its revocation would
// be served again then).
func noneHolds(t *testing.T, srv *etcdtest.Server, key, capability string, compromised bool, peers ...*peer) {
	t.Helper()
	settle(t, srv, peers...)
	for i, p := range peers {
		if e, ok := p.Get(key); ok {
			t.Errorf("node %d still holds %s (%s), registered before its revocation", i, key, e.Endpoint)
		}
	}
	if compromised {
		return
	}
	if _, err := peers[0].Enroll(context.Background(), key, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	settle(t, srv, peers...)
	for i, p := range peers {
		if got := p.Find(capability, registry.FindOptions{}); len(got) != 0 {
			t.Errorf("node %d finds %s at %s again once the key is enrolled anew", i, key, got[0].Endpoint)
		}
	}
}

// TestRevocationEvictsARegistrationNotYetSeen: node b registers a key's
// descriptor (or replaces the one node a holds); node a, whose feed has
// not delivered it yet, revokes the key. The revocation must not succeed
// without evicting what etcd holds. Before, a stored the revocation
// first and evicted in a second write: finding nothing of the key in its
// index it evicted nothing, or its eviction lost to b's replacement
// (concurrent_change after the revocation was stored, and the retry, the
// key already revoked, evicted nothing); either way b's registration
// outlived the revocation on every node (served again once the key was
// enrolled anew). Now the eviction is part of the revocation's own
// transaction, conditional on the descriptor a holds: a lagging a gets
// concurrent_change with nothing changed, and its retry evicts.
func TestRevocationEvictsARegistrationNotYetSeen(t *testing.T) {
	for _, replace := range []bool{false, true} {
		name := map[bool]string{false: "registered", true: "replaced"}[replace]
		t.Run(name, func(t *testing.T) {
			srv := etcdtest.Start(t)
			a, ha := joinHeld(t, srv, "/revlag/")
			b, _ := joinHeld(t, srv, "/revlag/")
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			priv, key := nodeKey(t)
			if _, err := a.Enroll(ctx, key, nil, time.Hour); err != nil {
				t.Fatal(err)
			}
			waitTrusted(t, b, key)
			t0 := time.Now()
			if replace {
				if _, err := b.Register(ctx, signedAt(t, priv, []string{"rev.lag"}, t0.Add(-time.Second), 7100)); err != nil {
					t.Fatal(err)
				}
				settle(t, srv, a)
			}

			ha.feed.Lock()
			if _, err := b.Register(ctx, signedAt(t, priv, []string{"rev.lag"}, t0, 7101)); err != nil {
				ha.feed.Unlock()
				t.Fatal(err)
			}
			res, err := a.Revoke(ctx, "", key, registry.ReasonCessation)
			ha.feed.Unlock()
			switch {
			case err == nil && len(res.Evicted) == 0:
				t.Errorf("a revoked %s without evicting b's registration of it: %+v", key, res)
			case err != nil && errWord(err) != registry.CodeWordConcurrentChange:
				t.Fatalf("revoke on a lagging node: %v, want success or %s", err, registry.CodeWordConcurrentChange)
			case err != nil:
				settle(t, srv, a)
				if res, err = a.Revoke(ctx, "", key, registry.ReasonCessation); err != nil || len(res.Evicted) != 1 {
					t.Errorf("the revocation retried: %+v, %v; want b's registration evicted", res, err)
				}
			}
			noneHolds(t, srv, key, "rev.lag", false, a, b)
		})
	}
}

// TestRegistrationCheckedBeforeARevocation: node b checks a descriptor
// against the key's trust, then node a revokes the key before b's write
// reaches etcd: an enrolled key's certificate (cessation of operation),
// or a pinned key for key_compromise. b's write must lose: before, it
// was conditional on the descriptor's record alone and stored a
// registration of a revoked key on every node. Now it is conditional on
// the key's keycerts record too, which every revocation of one of its
// certificates rewrites (concurrent_change), however many it holds.
func TestRegistrationCheckedBeforeARevocation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pinned bool
		reason string
		certs  int
	}{
		{"enrolled key, cessation", false, registry.ReasonCessation, 1},
		{"pinned key, key_compromise", true, registry.ReasonKeyCompromise, 0},
		{"key enrolled 130 times, cessation", false, registry.ReasonCessation, 130},
		{"pinned key enrolled 130 times, key_compromise", true, registry.ReasonKeyCompromise, 130},
	} {
		t.Run(tc.name, func(t *testing.T) {
			priv, key := nodeKey(t)
			var pinned []string
			if tc.pinned {
				pinned = []string{key}
			}
			srv := etcdtest.Start(t)
			a, _ := joinHeld(t, srv, "/revrace/", pinned...)
			b, hb := joinHeld(t, srv, "/revrace/", pinned...)
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			for range tc.certs {
				if _, err := a.Enroll(ctx, key, nil, time.Hour); err != nil {
					t.Fatal(err)
				}
			}
			if tc.certs > 0 {
				waitTrusted(t, b, key)
				settle(t, srv, a, b)
			}

			release, done := registerHeld(ctx, t, b, hb, signedAt(t, priv, []string{"rev.race"}, time.Now(), 7102), false)
			_, err := a.Revoke(ctx, "", key, tc.reason)
			close(release)
			if err != nil {
				t.Fatal(err)
			}
			if err := <-done; errWord(err) != registry.CodeWordConcurrentChange {
				t.Errorf("b's registration checked before the revocation: %v, want %s", err, registry.CodeWordConcurrentChange)
			}
			settle(t, srv, a, b)
			for i, p := range []*peer{a, b} {
				if got := len(p.Certificates(key)); got < tc.certs {
					t.Errorf("node %d holds %d certificates of the revoked key, want %d", i, got, tc.certs)
				}
				for _, cs := range p.Certificates(key) {
					if cs.Status != "revoked" {
						t.Errorf("node %d: certificate %s of the revoked key is %s", i, cs.CertID, cs.Status)
						break
					}
				}
			}
			noneHolds(t, srv, key, "rev.race", tc.reason == registry.ReasonKeyCompromise, a, b)
		})
	}
}

// TestEnrolmentOfAKeyCompromisedElsewhere: node a revokes a key for
// key_compromise; node b, whose feed has not delivered it, is asked to
// enroll that key. Before, b issued a signed join certificate for the
// blocked key (absent from the CRL, so valid to anyone checking
// certificates against the CRL): the write was conditional on the new
// certificate's record only. Now an enrolment is conditional on the CRL
// as the node holds it, which every revocation rewrites: b gets
// concurrent_change, and once caught up node_key_compromised.
func TestEnrolmentOfAKeyCompromisedElsewhere(t *testing.T) {
	srv := etcdtest.Start(t)
	a, _ := joinHeld(t, srv, "/compromise/")
	b, hb := joinHeld(t, srv, "/compromise/")
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	_, key := nodeKey(t)
	if _, err := a.Enroll(ctx, key, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	waitTrusted(t, b, key)

	hb.feed.Lock()
	if _, err := a.Revoke(ctx, "", key, registry.ReasonKeyCompromise); err != nil {
		hb.feed.Unlock()
		t.Fatal(err)
	}
	c, err := b.Enroll(ctx, key, nil, time.Hour)
	hb.feed.Unlock()
	if errWord(err) != registry.CodeWordConcurrentChange {
		t.Errorf("b enrolled a key compromised on a: %+v, %v; want %s", c, err, registry.CodeWordConcurrentChange)
	}
	settle(t, srv, a, b)
	for i, p := range []*peer{a, b} {
		for _, cs := range p.Certificates(key) {
			if cs.Status != "revoked" {
				t.Errorf("node %d holds certificate %s of the compromised key, %s", i, cs.CertID, cs.Status)
			}
		}
		if _, err := p.Enroll(ctx, key, nil, time.Hour); errWord(err) != "node_key_compromised" {
			t.Errorf("node %d: enrolment once caught up: %v, want node_key_compromised", i, err)
		}
	}
}

// TestKeyWithManyCertificates: a key enrolled 130 times registers through
// another node, and a revocation of the key revokes every certificate and
// evicts the registration on both nodes. Before, the registration (a
// condition per certificate) and the revocation (a write per
// certificate) each passed etcd's 128 operations in one transaction and
// failed; now the registration is conditional on the key's keycerts
// record instead and the revocation is written in steps, the first
// evicting.
func TestKeyWithManyCertificates(t *testing.T) {
	const certs = 130
	srv := etcdtest.Start(t)
	a, _ := joinHeld(t, srv, "/manycerts/")
	b, _ := joinHeld(t, srv, "/manycerts/")
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	priv, key := nodeKey(t)
	for range certs {
		if _, err := a.Enroll(ctx, key, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	waitTrusted(t, b, key)
	settle(t, srv, a, b)
	if _, err := b.Register(ctx, signedAt(t, priv, []string{"many.certs"}, time.Now(), 7103)); err != nil {
		t.Fatal(err)
	}
	settle(t, srv, a, b)
	res, err := a.Revoke(ctx, "", key, registry.ReasonCessation)
	if err != nil {
		t.Fatal(err)
	}
	if res.RevokedCount != certs || len(res.Evicted) != 1 || res.Evicted[0] != key {
		t.Errorf("revocation: %d revoked, evicted %v; want %d and the key", res.RevokedCount, res.Evicted, certs)
	}
	settle(t, srv, a, b)
	for i, p := range []*peer{a, b} {
		got := p.Certificates(key)
		if len(got) != certs {
			t.Errorf("node %d holds %d certificates of the key, want %d", i, len(got), certs)
		}
		for _, cs := range got {
			if cs.Status != "revoked" {
				t.Errorf("node %d: certificate %s is %s after the key's revocation", i, cs.CertID, cs.Status)
				break
			}
		}
		if _, ok := p.Get(key); ok {
			t.Errorf("node %d still holds the revoked key's registration", i)
		}
	}
}

// TestRegistrationCheckedBeforeACompromiseOfAnExpiredCertificate: a key
// holds a live certificate and an expired one; node b checks a
// descriptor of the key, then node a revokes the expired certificate for
// key_compromise, which blocks the key for good, before b's write
// reaches etcd. b's write must lose. Before, a registration was
// conditional on the key's live certificates only ("no revocation of an
// expired one changes the verdict"), so b stored a registration of a
// compromised key on every node; now it is conditional on the key's
// keycerts record, which that revocation rewrites.
func TestRegistrationCheckedBeforeACompromiseOfAnExpiredCertificate(t *testing.T) {
	srv := etcdtest.Start(t)
	a, _ := joinHeld(t, srv, "/expcomp/")
	b, hb := joinHeld(t, srv, "/expcomp/")
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	priv, key := nodeKey(t)
	old, err := a.Enroll(ctx, key, nil, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Enroll(ctx, key, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	settle(t, srv, a, b)
	waitFor(t, func() bool { return time.Now().After(old.ExpiresAt.Instant()) })

	release, done := registerHeld(ctx, t, b, hb, signedAt(t, priv, []string{"exp.comp"}, time.Now(), 7104), false)
	_, err = a.Revoke(ctx, old.CertID, "", registry.ReasonKeyCompromise)
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; errWord(err) != registry.CodeWordConcurrentChange {
		t.Errorf("b's registration checked before the compromise: %v, want %s", err, registry.CodeWordConcurrentChange)
	}
	noneHolds(t, srv, key, "exp.comp", true, a, b)
}

// TestRevocationByKeyAfterAnEnrolmentNotYetSeen: node b enrols a key
// anew; node a, whose feed has not delivered that certificate, revokes
// the key by node key. The revocation must not succeed leaving b's
// certificate valid (absent from the CRL, the key trusted by it). Before,
// neither write read what the other wrote — the enrolment is conditional
// on the CRL, which a revocation writes but an enrolment does not — so a
// revoked every certificate it knew and b's stayed issued. Now an
// enrolment and a revocation both rewrite the key's certificate record
// (state.KindKeyCerts), so the one that comes second loses: a gets
// concurrent_change, and its retry revokes b's certificate too.
func TestRevocationByKeyAfterAnEnrolmentNotYetSeen(t *testing.T) {
	for _, reason := range []string{registry.ReasonCessation, registry.ReasonKeyCompromise} {
		t.Run(reason, func(t *testing.T) {
			srv := etcdtest.Start(t)
			a, ha := joinHeld(t, srv, "/revenrol/")
			b, _ := joinHeld(t, srv, "/revenrol/")
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			_, key := nodeKey(t)
			if _, err := a.Enroll(ctx, key, nil, time.Hour); err != nil {
				t.Fatal(err)
			}
			settle(t, srv, a, b)

			ha.feed.Lock()
			if _, err := b.Enroll(ctx, key, nil, time.Hour); err != nil {
				ha.feed.Unlock()
				t.Fatal(err)
			}
			_, err := a.Revoke(ctx, "", key, reason)
			ha.feed.Unlock()
			if err != nil && errWord(err) != registry.CodeWordConcurrentChange {
				t.Fatalf("revoke on a lagging node: %v, want success or %s", err, registry.CodeWordConcurrentChange)
			} else if err != nil {
				settle(t, srv, a)
				if _, err := a.Revoke(ctx, "", key, reason); err != nil {
					t.Fatalf("the revocation retried: %v", err)
				}
			}
			settle(t, srv, a, b)
			for i, p := range []*peer{a, b} {
				certs := p.Certificates(key)
				if len(certs) != 2 {
					t.Errorf("node %d holds %d certificates of the key, want 2", i, len(certs))
				}
				for _, cs := range certs {
					if cs.Status != "revoked" {
						t.Errorf("node %d: certificate %s of the key revoked by key is %s", i, cs.CertID, cs.Status)
					}
				}
			}
		})
	}
}
