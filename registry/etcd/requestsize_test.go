package etcd_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capmesh/capmesh/internal/etcdtest"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/etcd"
	"github.com/capmesh/capmesh/registry/internal/state"
)

// maxRequestBytes is etcd's default --max-request-bytes (1.5 MiB).
const maxRequestBytes = 3 << 19

// TestRevocationWhenTheCRLNearsEtcdsRequestLimit: a fleet whose CRL
// lists some 10,000 revoked certificates, all expired for days, is just
// under etcd's 1.5 MiB request limit. A revocation must still be stored.
// Before, every new CRL listed every certificate ever revoked (a
// revocation by key lists the key's expired certificates too): past the
// limit etcd refused every revocation ("request is too large"), a
// key_compromise included, for good. Now a CRL leaves out the
// certificates expired for more than a day (state.CRLGrace).
func TestRevocationWhenTheCRLNearsEtcdsRequestLimit(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	st, err := etcd.Open(ctx, etcd.Options{Endpoints: srv.Endpoints(), Prefix: "/crlsize/", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	_, na, _ := ed25519.GenerateKey(rand.Reader)
	_, root, _ := ed25519.GenerateKey(rand.Reader)
	seedExpiredCRL(ctx, t, st, state.NewAuthority("capmesh", "na-capmesh", na, root, nil), maxRequestBytes-300)

	n, err := registry.NewNode(registry.Config{Store: st, Authority: na, RootKey: root, Logger: quiet, SweepInterval: time.Hour})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(); _ = st.Close() })
	_, key := nodeKey(t)
	c, err := n.Enroll(ctx, key, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	res, err := n.Revoke(ctx, "", key, registry.ReasonKeyCompromise)
	if err != nil {
		t.Fatalf("revocation with a CRL near etcd's request limit: %v", err)
	}
	crl, err := n.CurrentCRL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.CRLSequence != 2 || res.RevokedCount != 1 || len(crl.Revoked) != 1 || crl.Revoked[0].CertificateID != c.CertID {
		t.Errorf("revocation %+v, CRL lists %d certificates; want sequence 2 listing the new revocation alone", res, len(crl.Revoked))
	}
}

// seedExpiredCRL stores, as a fleet's past would have, certificates
// revoked and expired for days and a CRL of sequence 1 listing them, of
// at most size bytes and within an entry of it.
func seedExpiredCRL(ctx context.Context, t *testing.T, st *etcd.Store, auth *state.Authority, size int) {
	t.Helper()
	past := time.Now().Add(-72 * time.Hour)
	_, key := nodeKey(t)
	var revoked []descriptor.RevokedCertificate
	var ops []registry.Op
	crlSize := func() int {
		raw, _ := auth.NewCRL(1, revoked, past).MarshalJSON()
		return len(raw)
	}
	add := func(count int) {
		for range count {
			cs := auth.Issue(key, []string{"role:client"}, past, time.Hour, 1)
			cs.Status, cs.RevocationReason = "revoked", registry.ReasonCessation
			val, _ := json.Marshal(cs)
			ops = append(ops, registry.Op{Record: registry.Record{Kind: "cert", Key: cs.Parsed.CertID, Value: val}})
			revoked = append(revoked, descriptor.RevokedCertificate{CertificateID: cs.Parsed.CertID, RevokedAt: descriptor.TimeOf(past), Reason: registry.ReasonCessation, Issuer: auth.KeyID})
			if len(ops) == 100 {
				if err := st.Apply(ctx, ops...); err != nil {
					t.Fatal(err)
				}
				ops = ops[:0]
			}
		}
	}
	add(9000) // entries are all of one length: the rest is computed
	s0 := crlSize()
	add(1)
	per := crlSize() - s0
	add((size-s0)/per - 1)
	if err := st.Apply(ctx, ops...); err != nil {
		t.Fatal(err)
	}
	raw, _ := auth.NewCRL(1, revoked, past).MarshalJSON()
	if err := st.Apply(ctx, registry.Op{Record: registry.Record{Kind: "crl", Key: "active", Value: raw}}); err != nil {
		t.Fatalf("storing a CRL of %d bytes: %v", len(raw), err)
	}
	t.Logf("seeded a CRL of %d certificates, %d bytes", len(revoked), len(raw))
}

// TestLargeWritesAtOnceEachSucceed: eight writes of 700 KiB each, made
// at once through one store, are all stored. Each fits etcd's request
// limit alone; before, group commit put those that queued behind the
// first into one transaction of some 5 MiB, which the client refused
// ("trying to send message larger than max"), failing every one of them.
// Now calls share a transaction only within maxTxnBytes (1 MiB); a
// larger call goes alone (TestTakeBoundsBytes).
func TestLargeWritesAtOnceEachSucceed(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	st, err := etcd.Open(ctx, etcd.Options{Endpoints: srv.Endpoints(), Prefix: "/largewrites/", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	value := []byte(strings.Repeat("x", 700<<10))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			_, err := st.ApplyIf(ctx, nil, registry.Op{Record: registry.Record{Kind: "descriptor", Key: fmt.Sprint("key-", i), Value: value}})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	rs, err := st.List(ctx, "descriptor", time.Now())
	if err != nil || len(rs) != 8 {
		t.Errorf("%d records stored (%v), want 8", len(rs), err)
	}
}
