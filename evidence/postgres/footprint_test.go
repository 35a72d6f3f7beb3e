package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/postgres/pgtest"
)

// maxFootprint is issue 23's bound on the bytes on disk of one governed
// invocation of a safety-gated capability (five events and its recorded
// result), indexes included.
const maxFootprint = 1536

// TestFootprint: governed invocations of a safety-gated capability (five
// events and a recorded result each, every id random as in production)
// take at most 1.5 KB each in the database — pg_total_relation_size of
// the tables, their indexes and TOAST, measured as the growth from 300 to
// 1,500 invocations so that the tables' fixed pages do not count — and
// every one replays byte for byte with its chain intact.
func TestFootprint(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshDSN(t)
	s := open(t, dsn)
	defer s.Close()
	b, err := boundary.New(boundary.Config{HostID: "footprint-host", Store: s, Safety: boundary.FixtureSafety()})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Register(boundary.Capability{Descriptor: chp.CapabilityDescriptor{ID: "kv.get", Version: "1.0.0", Description: "echo"},
		Handler: func(_ context.Context, p json.RawMessage) (json.RawMessage, error) { return p, nil }})
	if err != nil {
		t.Fatal(err)
	}
	var corrs []string
	invoke := func(n int) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < n; i += 8 {
					res, err := b.Invoke(ctx, &chp.InvocationEnvelope{CapabilityID: "kv.get", Payload: json.RawMessage(fmt.Sprintf(`{"key":"k%d"}`, i))})
					if err != nil || !res.Success || len(res.EvidenceIDs) != 5 {
						t.Errorf("invoke: %v (%d events)", err, len(res.EvidenceIDs))
						return
					}
					mu.Lock()
					corrs = append(corrs, res.Correlation.CorrelationID)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	size := func() int64 {
		var n int64
		err := s.pool.QueryRow(ctx, `SELECT pg_total_relation_size('evidence_blocks') + pg_total_relation_size('evidence_result_log')`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	invoke(300)
	before := size()
	invoke(1200)
	if t.Failed() {
		return
	}
	per := float64(size()-before) / 1200
	t.Logf("%.0f bytes per governed invocation (5 events and a result)", per)
	if per > maxFootprint {
		t.Errorf("%.0f bytes per invocation, want at most %d", per, maxFootprint)
	}
	for _, c := range corrs[:50] {
		recs, err := s.Replay(ctx, evidence.Query{CorrelationID: c})
		if err != nil || len(recs) != 5 {
			t.Fatalf("replay %s: %d records, %v", c, len(recs), err)
		}
		events := make([]chp.StoredEvent, len(recs))
		for i, r := range recs {
			events[i] = chp.StoredEvent{Sequence: r.Sequence, Data: r.Data, ContentHash: r.ContentHash, PrevHash: r.PrevHash}
		}
		if v := chp.VerifyChain(c, events); !v.Valid {
			t.Fatalf("chain %s does not verify after decompression: %+v", c, v)
		}
	}
}
