package state

import (
	"container/heap"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/store"
)

// Fill adds to t the stored certificates and the active CRL, and returns
// the writes that give the certificate records stored without an expiry
// (before CertRetention) theirs.
func (t *Authority) Fill(certs, crls []store.Record) ([]store.Op, error) {
	var legacy []store.Op
	for _, r := range certs {
		cs, err := ParseCertState(r.Value)
		if err != nil {
			return nil, fmt.Errorf("registry: stored certificate %s: %w", r.Key, err)
		}
		t.AddCert(cs)
		if r.ExpiresAt.IsZero() && !RecordExpiry(cs).IsZero() {
			legacy = append(legacy, store.Op{Record: CertRecord(cs)})
		}
	}
	for _, r := range crls {
		if r.Key != "active" {
			continue
		}
		c, err := descriptor.ParseCRL(r.Value)
		if err != nil {
			return nil, fmt.Errorf("registry: stored CRL: %w", err)
		}
		t.CRL = c
	}
	return legacy, nil
}

// InSteps calls write with ops in steps, until one fails: on a shared
// store SharedStep at a time (within etcd's 128 operations with their
// conditions), on a node's own store up to 10,000 (one transaction each).
func InSteps(ops []store.Op, shared bool, write func([]store.Op) error) error {
	n := 10000
	if shared {
		n = SharedStep
	}
	for len(ops) > 0 {
		k := min(len(ops), n)
		if err := write(ops[:k]); err != nil {
			return err
		}
		ops = ops[k:]
	}
	return nil
}

// SeedOf returns the private key stored as the seed of record name.
func SeedOf(rs []store.Record, name string) (ed25519.PrivateKey, bool) {
	for _, r := range rs {
		if r.Key == name && len(r.Value) == ed25519.SeedSize {
			return ed25519.NewKeyFromSeed(r.Value), true
		}
	}
	return nil, false
}

// Invite is an invite token's stored state (its record's key is the
// token's hash, TokenHash).
type Invite struct {
	Roles            []string  `json:"roles"`
	MaxValidityHours int       `json:"max_validity_hours"`
	ExpiresAt        time.Time `json:"expires_at"`
}

// FindInvite returns the invite of token among rs, nil when none.
func FindInvite(rs []store.Record, token string) (*Invite, error) {
	h := TokenHash(token)
	for _, r := range rs {
		if r.Key == h {
			var inv Invite
			if err := json.Unmarshal(r.Value, &inv); err != nil {
				return nil, err
			}
			return &inv, nil
		}
	}
	return nil, nil
}

// SharedStep is how many certificate records one write on a shared store
// rewrites at most: with their conditions, well within etcd's 128
// operations.
const SharedStep = 48

// CertRetention is how long after its expiry a certificate's record is
// kept: past it, renewing the certificate is refused as unknown rather
// than expired, and the record leaves the store (a lease on etcd, Purge
// on SQLite) and memory (Lapsed, Forget). Without it every renewal
// would add a record for good.
const CertRetention = 7 * 24 * time.Hour

// CertRecord is cs's stored record, expiring at RecordExpiry.
func CertRecord(cs *CertState) store.Record {
	val, _ := json.Marshal(cs)
	return store.Record{Kind: KindCert, Key: cs.Parsed.CertID, Value: val, ExpiresAt: RecordExpiry(cs)}
}

// RecordExpiry is when cs's record expires: CertRetention after the
// certificate; never (zero) for one revoked for key_compromise (the
// pinned pseudo-certificate included): it is the key's block.
func RecordExpiry(cs *CertState) time.Time {
	if cs.Status == "revoked" && cs.RevocationReason == ReasonKeyCompromise {
		return time.Time{}
	}
	return cs.Parsed.ExpiresAt.Instant().Add(CertRetention)
}

// MaxLapsed is how many certificates Lapsed returns at most: a sweep
// forgets them under the readers' lock, which Find waits for (a store
// written before records expired, or a clock that jumps, makes millions
// due at once); the rest wait for the next sweeps.
const MaxLapsed = 10000

// Lapsed returns the ids of the certificates whose records have expired
// at now, at most MaxLapsed, taking only those due from the index, not
// reading every certificate: a sweep runs every second under the
// writers' lock, and a fleet holds millions of certificates. The caller
// forgets them (writers' state: it reads without the readers' lock).
func (t *Authority) Lapsed(now time.Time) []string {
	var ids []string
	for len(t.lapse) > 0 && len(ids) < MaxLapsed && !now.Before(t.lapse[0].at) {
		e := heap.Pop(&t.lapse).(lapseEntry)
		if t.Certs[e.cs.Parsed.CertID] == e.cs && !RecordExpiry(e.cs).IsZero() {
			ids = append(ids, e.cs.Parsed.CertID) // not forgotten, nor kept for good
		}
	}
	return ids
}

// indexLapse adds cs to the index Lapsed reads, unless its record is
// kept for good.
func (t *Authority) indexLapse(cs *CertState) {
	if exp := RecordExpiry(cs); !exp.IsZero() {
		heap.Push(&t.lapse, lapseEntry{at: exp, cs: cs})
	}
}

// lapseEntry is a certificate in the index Lapsed reads, under its
// record's expiry when it was added.
type lapseEntry struct {
	at time.Time
	cs *CertState
}

// lapseHeap is a container/heap of lapseEntry, soonest first.
type lapseHeap []lapseEntry

func (h lapseHeap) Len() int           { return len(h) }
func (h lapseHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h lapseHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lapseHeap) Push(x any)        { *h = append(*h, x.(lapseEntry)) }
func (h *lapseHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// Forget drops certificate id, its record deleted (writer and readers'
// locks).
func (t *Authority) Forget(id string) {
	cs, ok := t.Certs[id]
	if !ok {
		return
	}
	key := cs.Parsed.NodePublicKey
	delete(t.Certs, id)
	t.ByKey[key] = slices.DeleteFunc(t.ByKey[key], func(c *CertState) bool { return c == cs })
	if len(t.ByKey[key]) == 0 {
		delete(t.ByKey, key)
	}
	t.Changed(key)
}
