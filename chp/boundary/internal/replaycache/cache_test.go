package replaycache

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/chp"
)

// TestResultCacheBounded: the cache holds at most its size; the oldest
// results go first.
func TestResultCacheBounded(t *testing.T) {
	now := time.Now
	c := New(resultShards*4, time.Hour, now)
	for i := range 1000 {
		id := fmt.Sprint("id", i)
		rec, wait, err := c.Claim(id, i%2 == 0, RequestDigest{})
		if err != nil || rec != nil || wait != nil {
			t.Fatalf("claim %d: %v %v %v", i, rec, wait, err)
		}
		c.Settle(id, &chp.InvocationResult{InvocationID: id}, nil, RequestDigest{}, now())
	}
	total := 0
	for i := range c.shards {
		s := &c.shards[i]
		n := 0
		for _, sl := range s.ring {
			if sl.id != "" {
				n++
			}
		}
		if n > 4 || len(s.idx)+len(s.coll) != n || len(s.flying) != 0 {
			t.Errorf("shard %d holds %d results, indexes %d+%d, %d in flight", i, n, len(s.idx), len(s.coll), len(s.flying))
		}
		total += n
	}
	if total > resultShards*4 {
		t.Fatalf("cache holds %d results", total)
	}
	if rec, _, _ := c.Claim("id999", false, RequestDigest{}); rec == nil {
		t.Error("newest result evicted")
	}
	if rec, wait, _ := c.Claim("id0", false, RequestDigest{}); rec != nil || wait != nil {
		t.Error("oldest result kept")
	}
}

// TestResultCacheCollisions: ids whose 64-bit hashes collide are told apart
// by the id itself, recorded, found and evicted independently.
func TestResultCacheCollisions(t *testing.T) {
	c := New(resultShards*3, time.Hour, time.Now)
	s := &c.shards[0]
	put := func(id string, h uint64) {
		s.record(resultSlot{id: id, h: h, res: &chp.InvocationResult{InvocationID: id}, at: time.Now().UnixNano()}, c.per)
	}
	put("a", 7)
	put("b", 7) // collides with a
	put("c", 8)
	for _, id := range []string{"a", "b", "c"} {
		h := uint64(7)
		if id == "c" {
			h = 8
		}
		if i, ok := s.find(h, id); !ok || s.ring[i].id != id {
			t.Errorf("%s not found", id)
		}
	}
	if _, ok := s.find(7, "d"); ok {
		t.Error("an unrecorded id with a colliding hash was found")
	}
	put("d", 9) // evicts a: b stays findable through coll
	if _, ok := s.find(7, "a"); ok {
		t.Error("evicted a still found")
	}
	if i, ok := s.find(7, "b"); !ok || s.ring[i].id != "b" {
		t.Error("b lost when a was evicted")
	}
	put("e", 7) // evicts b; e takes the free hash
	if i, ok := s.find(7, "e"); !ok || s.ring[i].id != "e" || len(s.coll) != 0 {
		t.Errorf("e: ok=%v coll=%v", ok, s.coll)
	}
}

// TestResultCacheChunks: recorded results live in chunks that are reused
// or freed once every result in them is evicted — the cache's memory stays
// bounded by its size, whatever passes through it — and each replay gives
// back exactly the result recorded, large ones (kept on the heap) included.
func TestResultCacheChunks(t *testing.T) {
	c := New(resultShards*4, time.Hour, time.Now)
	result := func(i int) []byte {
		pad := 200 + i%700
		if i%97 == 0 {
			pad = maxChunk/4 + 1 // larger than a chunk takes
		}
		return fmt.Appendf(nil, `{"capability_id":"x","data":{"n":%d,"pad":%q},"invocation_id":"id%d","outcome":"success","success":true}`,
			i, strings.Repeat("p", pad), i)
	}
	const n = 20000
	for i := range n {
		id := fmt.Sprint("id", i)
		if _, wait, err := c.Claim(id, true, RequestDigest{}); err != nil || wait != nil {
			t.Fatal(err)
		}
		c.Settle(id, &chp.InvocationResult{InvocationID: id}, result(i), RequestDigest{}, time.Now())
	}
	c.mapped.mu.Lock()
	mapped := len(c.mapped.m)
	c.mapped.mu.Unlock()
	for i := range c.shards {
		s := &c.shards[i]
		live := 0
		for _, ch := range s.chunks {
			live += ch.live
		}
		if len(s.chunks) > 3 || live > 4 {
			t.Errorf("shard %d: %d chunks with %d results", i, len(s.chunks), live)
		}
	}
	if mapped > 4*resultShards {
		t.Errorf("%d chunks mapped for %d results", mapped, resultShards*4)
	}
	found := 0
	for i := n - 200; i < n; i++ {
		rec, _, err := c.Claim(fmt.Sprint("id", i), false, RequestDigest{})
		if err != nil {
			t.Fatal(err)
		}
		if rec == nil {
			continue // evicted: shards are not filled evenly
		}
		found++
		want := map[string]any{}
		_ = json.Unmarshal(result(i), &want)
		var gotData, wantData any
		_ = json.Unmarshal(rec.Data, &gotData)
		wantData = want["data"]
		if rec.InvocationID != fmt.Sprint("id", i) || fmt.Sprint(gotData) != fmt.Sprint(wantData) {
			t.Fatalf("id%d replayed %s, want %v", i, rec.Data, wantData)
		}
	}
	if found < resultShards*2 {
		t.Errorf("only %d of the newest 200 results replay", found)
	}
}
