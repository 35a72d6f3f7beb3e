// Package replaycache is the boundary's idempotent-replay cache
// (chp-v0.2.md §13): invocation_id → the recorded InvocationResult, for a
// bounded window and size, with concurrent duplicates of an id waiting for
// the first instead of executing twice.
//
// Data flow: Boundary.Invoke → Claim(id) → recorded result (replay) | a
// channel to wait on (a duplicate in flight; then Claim again) | lead →
// the pipeline runs → Settle(id, result, encoded result) → later Claims
// replay it. Load refills the cache from a durable store's recorded results
// when a boundary starts.
package replaycache

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/evidence"
)

// Cache is the idempotent-replay cache: serving state, never evidence. It maps invocation_id to the recorded result for a
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
// lock. A shard keeps the ids in flight in a small map, and the recorded
// results in a ring of slots indexed by a 64-bit hash of the id. Their
// bytes — the id and the encoded result — are copied into chunks of memory
// outside the Go heap (mapBytes), filled in order and reused once every
// result in them is gone: recording a result allocates nothing, and a full
// cache adds nothing to the heap the garbage collector paces itself by. An
// id this host has just generated cannot have been recorded (128 random
// bits): its claim skips the index and only marks it in flight.
type Cache struct {
	seed   maphash.Seed
	window time.Duration
	per    int // recorded results per shard
	now    func() time.Time
	mapped *chunkSet
	shards [resultShards]resultShard
}

// resultChunk is a block of memory holding recorded ids and results back
// to back.
type resultChunk struct {
	b      []byte // len(b) bytes used
	mapped bool   // outside the heap (in the cache's chunkSet)
	live   int    // slots whose bytes are here
}

// chunkSet holds a cache's mapped chunks, apart from the cache, so that a
// cleanup can release them once the cache is unreachable.
type chunkSet struct {
	mu sync.Mutex
	m  map[*resultChunk]struct{}
}

func (cs *chunkSet) add(c *resultChunk) {
	cs.mu.Lock()
	cs.m[c] = struct{}{}
	cs.mu.Unlock()
}

// free releases c, which no slot uses.
func (cs *chunkSet) free(c *resultChunk) {
	cs.mu.Lock()
	delete(cs.m, c)
	cs.mu.Unlock()
	unmapBytes(c.b)
	c.b = nil
}

func (cs *chunkSet) releaseAll() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for c := range cs.m {
		unmapBytes(c.b)
	}
	clear(cs.m)
}

// A shard's first chunk has minChunk bytes, each new one twice its
// predecessor's up to maxChunk; a result larger than maxChunk/4 is kept on
// the heap.
const (
	minChunk = 16 << 10
	maxChunk = 1 << 20
)

const resultShards = 16

type resultShard struct {
	mu     sync.Mutex
	flying map[string]chan struct{} // ids in flight → closed when settled (made when a duplicate waits)
	idx    map[uint64]int32         // hash of a recorded id → its slot
	coll   map[string]int32         // a recorded id whose hash another recorded id holds → its slot
	ring   []resultSlot             // recorded results, in the order recorded; a ring once it holds per
	next   int                      // the slot the next result takes once the ring is full
	chunks []*resultChunk           // in the order filled; the last takes new results
	spares []*resultChunk           // emptied full-size chunks, kept for reuse
	size   int                      // the size of the next new chunk
	mapped *chunkSet
}

// resultSlot is one recorded result (id == "": empty). id and raw point
// into chunk (or, for a large result, the heap); they never leave the
// cache.
type resultSlot struct {
	id     string
	h      uint64
	raw    []byte                // the encoded result
	res    *chp.InvocationResult // or decoded (on its first replay, or when it could not be encoded)
	chunk  *resultChunk
	at     int64 // when it was recorded, unix ns
	inColl bool  // indexed by coll, not idx
	req    RequestDigest
}

// RequestDigest identifies what an invocation asked for (the boundary
// hashes capability, versions, mode, payload and subject): a recorded id is
// replayed only to the same request. The zero digest is unknown (a result
// recorded before digests were kept) and matches any request.
type RequestDigest [32]byte

// ErrConflict is Claim's answer to an invocation_id recorded for a
// different request.
var ErrConflict = errors.New("replaycache: invocation_id already recorded for a different request")

// requestMember is the member, last in a recorded result's encoding, that
// carries its request digest through a durable store.
const requestMember = `,"io.github.capmesh.request":"`

// AppendRequest adds d to an encoded result raw (a JSON object), as its last
// member, so that Load recovers it. Decoding raw as an InvocationResult
// ignores the member.
func AppendRequest(raw []byte, d RequestDigest) []byte {
	if d == (RequestDigest{}) || len(raw) == 0 || raw[len(raw)-1] != '}' {
		return raw
	}
	raw = append(raw[:len(raw)-1], requestMember...)
	raw = hex.AppendEncode(raw, d[:])
	return append(raw, `"}`...)
}

// requestOf returns the digest AppendRequest added to raw (zero: none).
func requestOf(raw []byte) RequestDigest {
	var d RequestDigest
	n := len(requestMember) + 2*len(d) + 2
	if len(raw) < n || !bytes.HasPrefix(raw[len(raw)-n:], []byte(requestMember)) {
		return d
	}
	if _, err := hex.Decode(d[:], raw[len(raw)-n+len(requestMember):len(raw)-2]); err != nil {
		return RequestDigest{}
	}
	return d
}

// New returns a cache of at most size results (at least one per shard),
// each replayed for window after it was recorded, by the clock now.
func New(size int, window time.Duration, now func() time.Time) *Cache {
	c := &Cache{seed: maphash.MakeSeed(), window: window, per: max(1, size/resultShards), now: now,
		mapped: &chunkSet{m: map[*resultChunk]struct{}{}}}
	for i := range c.shards {
		s := &c.shards[i]
		s.flying = make(map[string]chan struct{})
		s.idx = make(map[uint64]int32)
		s.size = minChunk
		s.mapped = c.mapped
	}
	runtime.AddCleanup(c, (*chunkSet).releaseAll, c.mapped)
	return c
}

// keep copies id and raw into the shard's chunks and returns the copies
// (raw nil stays nil) and the chunk holding them (nil: the heap).
func (s *resultShard) keep(id string, raw []byte) (string, []byte, *resultChunk) {
	n := len(id) + len(raw)
	if n > maxChunk/4 {
		b := make([]byte, 0, n)
		b = append(append(b, id...), raw...)
		if raw == nil {
			return string(b), nil, nil
		}
		return string(b[:len(id)]), b[len(id):], nil
	}
	var c *resultChunk
	if k := len(s.chunks); k > 0 && cap(s.chunks[k-1].b)-len(s.chunks[k-1].b) >= n {
		c = s.chunks[k-1]
	} else {
		c = s.newChunk()
		s.chunks = append(s.chunks, c)
	}
	off := len(c.b)
	c.b = append(append(c.b, id...), raw...)
	c.live++
	idv := unsafe.String(unsafe.SliceData(c.b[off:]), len(id))
	if raw == nil {
		return idv, nil, c
	}
	return idv, c.b[off+len(id) : off+n : off+n], c
}

// newChunk returns an empty chunk: a spare, or a new one.
func (s *resultShard) newChunk() *resultChunk {
	if k := len(s.spares); k > 0 {
		c := s.spares[k-1]
		s.spares[k-1] = nil
		s.spares = s.spares[:k-1]
		return c
	}
	size := s.size
	s.size = min(2*s.size, maxChunk)
	if b := mapBytes(size); b != nil {
		c := &resultChunk{b: b[:0], mapped: true}
		s.mapped.add(c)
		return c
	}
	return &resultChunk{b: make([]byte, 0, size)}
}

// unkeep releases what keep returned for a slot: a chunk no result uses any
// more, once it is the oldest, becomes a spare (a full-size one: the cache
// keeps the memory its size needs, as a heap would, instead of faulting
// fresh pages in for every chunk) or is freed.
func (s *resultShard) unkeep(c *resultChunk) {
	if c == nil {
		return
	}
	c.live--
	for len(s.chunks) > 1 && s.chunks[0].live == 0 {
		old := s.chunks[0]
		s.chunks[0] = nil
		s.chunks = s.chunks[1:]
		switch {
		case cap(old.b) == maxChunk:
			old.b = old.b[:0]
			s.spares = append(s.spares, old)
		case old.mapped:
			s.mapped.free(old)
		}
	}
}

func (c *Cache) locate(id string) (*resultShard, uint64) {
	h := maphash.String(c.seed, id)
	return &c.shards[h%resultShards], h
}

// Claim looks id up. It returns the recorded result to replay, or a channel
// to wait on while another call with the same id is in flight (then claim
// again), or — when neither — marks id in flight: the caller leads, and
// must settle. fresh says the id was generated for this call: it can be in
// flight (a caller who read it in the evidence may present it) but not
// recorded. An id recorded for a request other than req is ErrConflict.
func (c *Cache) Claim(id string, fresh bool, req RequestDigest) (recorded *chp.InvocationResult, wait <-chan struct{}, err error) {
	s, h := c.locate(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.flying[id]; ok {
		if ch == nil {
			ch = make(chan struct{})
			s.flying[id] = ch
		}
		return nil, ch, nil
	}
	if !fresh {
		if i, ok := s.find(h, id); ok {
			sl := &s.ring[i]
			if c.now().UnixNano()-sl.at <= int64(c.window) {
				if sl.req != (RequestDigest{}) && req != (RequestDigest{}) && sl.req != req {
					return nil, nil, ErrConflict
				}
				if sl.res == nil {
					var r chp.InvocationResult
					if err := json.Unmarshal(sl.raw, &r); err != nil {
						return nil, nil, fmt.Errorf("replaycache: recorded result of %s: %w", id, err)
					}
					sl.res, sl.raw = &r, nil
				}
				return sl.res, nil, nil
			}
			s.drop(i) // expired
		}
	}
	s.flying[id] = nil
	return nil, nil, nil
}

// Settle ends the leader's flight and records its outcome for request req,
// recorded at at: the encoded result raw or, when nil, a copy of res. A
// failed invocation (res == nil) leaves nothing to replay.
func (c *Cache) Settle(id string, res *chp.InvocationResult, raw []byte, req RequestDigest, at time.Time) {
	s, h := c.locate(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.flying[id]
	delete(s.flying, id)
	if res != nil {
		sl := resultSlot{h: h, at: at.UnixNano(), req: req}
		sl.id, sl.raw, sl.chunk = s.keep(id, raw)
		if raw == nil {
			sl.res = detachResult(res)
		}
		s.record(sl, c.per)
	}
	if ch != nil {
		close(ch)
	}
}

// detachResult returns a copy of res that shares no memory with the
// invocation that produced it (whose evidence ids and started_at it points
// into, and which a direct call recycles).
func detachResult(res *chp.InvocationResult) *chp.InvocationResult {
	cp := *res
	cp.EvidenceIDs = slices.Clone(res.EvidenceIDs)
	if res.StartedAt != nil {
		t := *res.StartedAt
		cp.StartedAt = &t
	}
	return &cp
}

// find returns the slot of recorded id.
func (s *resultShard) find(h uint64, id string) (int32, bool) {
	if i, ok := s.idx[h]; ok && s.ring[i].id == id {
		return i, true
	}
	if len(s.coll) > 0 {
		i, ok := s.coll[id]
		return i, ok
	}
	return 0, false
}

// record adds sl, whose id is not recorded, evicting the oldest result
// when the ring is full.
func (s *resultShard) record(sl resultSlot, per int) {
	var i int32
	if len(s.ring) < per {
		i = int32(len(s.ring))
		s.ring = append(s.ring, resultSlot{})
	} else {
		i = int32(s.next)
		s.next = (s.next + 1) % len(s.ring)
		s.drop(i)
	}
	if j, taken := s.idx[sl.h]; taken && j != i {
		// Another recorded id has this hash.
		if s.coll == nil {
			s.coll = make(map[string]int32)
		}
		s.coll[sl.id] = i
		sl.inColl = true
	} else {
		s.idx[sl.h] = i
	}
	s.ring[i] = sl
}

// drop empties slot i.
func (s *resultShard) drop(i int32) {
	sl := &s.ring[i]
	if sl.id == "" {
		return
	}
	if sl.inColl {
		delete(s.coll, sl.id)
	} else {
		delete(s.idx, sl.h)
	}
	c := sl.chunk
	*sl = resultSlot{}
	s.unkeep(c)
}

// Load fills the cache from a durable store's recorded results: the newest
// ones within the window, as many as the cache holds.
func (c *Cache) Load(ctx context.Context, rs evidence.ResultStore) (int, error) {
	var recent []evidence.Result
	limit := c.per * resultShards
	err := rs.Results(ctx, c.now().Add(-c.window), func(r evidence.Result) bool {
		recent = append(recent, r)
		return len(recent) < limit
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for i := len(recent) - 1; i >= 0; i-- { // oldest first, so the newest stay
		r := recent[i]
		s, h := c.locate(r.InvocationID)
		s.mu.Lock()
		if j, ok := s.find(h, r.InvocationID); ok {
			s.drop(j) // a store may hold an id twice; the newer wins
		}
		sl := resultSlot{h: h, at: r.At.UnixNano(), req: requestOf(r.Data)}
		sl.id, sl.raw, sl.chunk = s.keep(r.InvocationID, r.Data)
		s.record(sl, c.per)
		s.mu.Unlock()
		n++
	}
	return n, nil
}
