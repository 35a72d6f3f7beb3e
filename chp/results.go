package chp

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/capmesh/capmesh/evidence"
)

// resultCache is the idempotent-replay cache of chp-v0.2.md §13: serving
// state, never evidence. It maps invocation_id to the recorded result for a
// bounded window and size; the oldest results go first when it is full.
// Concurrent duplicates of an id in flight wait for the first (the leader)
// instead of executing twice.
//
// With a durable store (evidence.ResultStore) every recorded result is also
// written beside the evidence, in the same group commit, and the cache is
// refilled from the store when the boundary starts: a retry after a restart
// replays instead of executing again.
//
// The cache is sharded by id so that concurrent callers rarely meet on a
// lock, and an entry allocates nothing beyond itself unless a duplicate has
// to wait for it.
type resultCache struct {
	seed   maphash.Seed
	window time.Duration
	per    int // entries per shard
	now    func() time.Time
	shards [resultShards]resultShard
}

const resultShards = 16

type resultShard struct {
	mu   sync.Mutex
	m    map[string]*resultEntry
	fifo []*resultEntry // insertion order; fifo[head:] are live
	head int
}

type resultEntry struct {
	id   string
	res  *InvocationResult // the recorded result (nil: in flight, or raw)
	raw  []byte            // or its encoded form, as written to a durable store
	at   int64             // when it was recorded, unix ns
	done bool
	wait chan struct{} // made when a duplicate waits for the leader
}

func newResultCache(size int, window time.Duration, now func() time.Time) *resultCache {
	c := &resultCache{seed: maphash.MakeSeed(), window: window, per: max(1, size/resultShards), now: now}
	for i := range c.shards {
		c.shards[i].m = make(map[string]*resultEntry)
	}
	return c
}

func (c *resultCache) shard(id string) *resultShard {
	return &c.shards[maphash.String(c.seed, id)%resultShards]
}

// claim looks id up. It returns the recorded result to replay, or a channel
// to wait on while another call with the same id is in flight (then claim
// again), or — when neither — a new entry the caller leads and must settle.
func (c *resultCache) claim(id string) (recorded *InvocationResult, wait <-chan struct{}, lead *resultEntry, err error) {
	s := c.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[id]; ok {
		switch {
		case !e.done:
			if e.wait == nil {
				e.wait = make(chan struct{})
			}
			return nil, e.wait, nil, nil
		case c.now().UnixNano()-e.at <= int64(c.window):
			if e.res == nil && e.raw != nil {
				var r InvocationResult
				if err := json.Unmarshal(e.raw, &r); err != nil {
					return nil, nil, nil, fmt.Errorf("chp: recorded result of %s: %w", id, err)
				}
				e.res, e.raw = &r, nil
			}
			if e.res != nil {
				return e.res, nil, nil, nil
			}
		}
		delete(s.m, id) // expired
	}
	e := &resultEntry{id: id}
	s.insert(e, c.per)
	return nil, nil, e, nil
}

// insert adds e and evicts the oldest settled entries beyond per.
func (s *resultShard) insert(e *resultEntry, per int) {
	s.m[e.id] = e
	s.fifo = append(s.fifo, e)
	for len(s.fifo)-s.head > per {
		old := s.fifo[s.head]
		if !old.done {
			break // never evict an entry in flight
		}
		s.fifo[s.head] = nil
		s.head++
		if s.m[old.id] == old {
			delete(s.m, old.id)
		}
	}
	if s.head > 1024 && s.head > len(s.fifo)/2 {
		n := copy(s.fifo, s.fifo[s.head:])
		clear(s.fifo[n:])
		s.fifo, s.head = s.fifo[:n], 0
	}
}

// settle records the leader's outcome, recorded at at; a failed invocation
// (res == nil) leaves nothing to replay. raw, when the result was written to a durable
// store, is its encoded form: the cache keeps that (one allocation the
// garbage collector need not look into) and decodes it on a replay.
func (c *resultCache) settle(e *resultEntry, res *InvocationResult, raw []byte, at time.Time) {
	s := c.shard(e.id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if res != nil {
		e.at = at.UnixNano()
		if raw != nil {
			e.raw = raw
		} else {
			cp := *res
			e.res = &cp
		}
	} else if s.m[e.id] == e {
		delete(s.m, e.id)
	}
	e.done = true
	if e.wait != nil {
		close(e.wait)
	}
}

// load fills the cache from a durable store's recorded results: the newest
// ones within the window, as many as the cache holds.
func (c *resultCache) load(ctx context.Context, rs evidence.ResultStore) (int, error) {
	var recent []evidence.Result
	limit := c.per * resultShards
	err := rs.Results(ctx, c.now().Add(-c.window), func(r evidence.Result) bool {
		recent = append(recent, r)
		return len(recent) < limit
	})
	if err != nil {
		return 0, err
	}
	for i := len(recent) - 1; i >= 0; i-- { // oldest first, so the newest stay
		r := recent[i]
		s := c.shard(r.InvocationID)
		s.mu.Lock()
		s.insert(&resultEntry{id: r.InvocationID, raw: r.Data, at: r.At.UnixNano(), done: true}, c.per)
		s.mu.Unlock()
	}
	return len(recent), nil
}
