package gateway

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/capmesh/capmesh/evidence"
)

// resultCache is the gateway's exactly-once cache (chp-v0.2.md §13.2):
// member results keyed by the client's invocation id, first write wins,
// bounded in count (oldest evicted) and in age. Serving state, never
// evidence.
type resultCache struct {
	mu     sync.Mutex
	max    int
	window time.Duration
	now    func() time.Time
	byID   map[string]cached
	order  []string // insertion order, for eviction
}

type cached struct {
	resp []byte
	at   time.Time
}

func newResultCache(max int, window time.Duration, now func() time.Time) *resultCache {
	return &resultCache{max: max, window: window, now: now, byID: map[string]cached{}}
}

// put records resp for id, at at, unless id already has a live result; it
// reports whether it did.
func (c *resultCache) put(id string, resp []byte, at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[id]; ok {
		if c.now().Sub(e.at) < c.window {
			return false
		}
		c.byID[id] = cached{resp: append([]byte(nil), resp...), at: at} // its slot in order stays
		return true
	}
	for len(c.order) >= c.max {
		delete(c.byID, c.order[0])
		c.order = c.order[1:]
	}
	c.byID[id] = cached{resp: append([]byte(nil), resp...), at: at}
	c.order = append(c.order, id)
	return true
}

// load fills the cache from a durable result store: the results of the
// window, oldest kept when an id was recorded twice.
func (c *resultCache) load(ctx context.Context, rs evidence.ResultStore) error {
	var all []evidence.Result
	err := rs.Results(ctx, c.now().Add(-c.window), func(r evidence.Result) bool {
		all = append(all, r)
		return true
	})
	if err != nil {
		return err
	}
	for i := len(all) - 1; i >= 0; i-- { // newest first: replay oldest first
		c.put(all[i].InvocationID, all[i].Data, all[i].At)
	}
	return nil
}

// get returns id's recorded result marked "replayed": true.
func (c *resultCache) get(id string) ([]byte, bool) {
	c.mu.Lock()
	e, ok := c.byID[id]
	c.mu.Unlock()
	if !ok || c.now().Sub(e.at) >= c.window {
		return nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(e.resp, &m) != nil {
		return nil, false
	}
	m["replayed"] = json.RawMessage("true")
	return encodeRaw(m), true
}
