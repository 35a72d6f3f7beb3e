package chp

import (
	"container/list"
	"sync"
	"time"
)

// resultCache is the idempotent-replay cache of chp-v0.2.md §13: serving
// state, never evidence. It maps invocation_id to the recorded result for a
// bounded window and size. Concurrent duplicates of an id in flight wait for
// the first (the leader) instead of executing twice.
type resultCache struct {
	mu     sync.Mutex
	size   int
	window time.Duration
	m      map[string]*list.Element
	lru    *list.List
}

type resultEntry struct {
	id   string
	done chan struct{}
	res  *InvocationResult
	at   time.Time
}

func newResultCache(size int, window time.Duration) *resultCache {
	return &resultCache{size: size, window: window, m: map[string]*list.Element{}, lru: list.New()}
}

// claim returns the entry for id; leader is true when the caller must run
// the invocation (and then settle the entry).
func (c *resultCache) claim(id string) (e *resultEntry, leader bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[id]; ok {
		e = el.Value.(*resultEntry)
		select {
		case <-e.done:
			if time.Since(e.at) <= c.window && e.res != nil {
				return e, false
			}
			c.lru.Remove(el)
			delete(c.m, id)
		default:
			return e, false // in flight
		}
	}
	e = &resultEntry{id: id, done: make(chan struct{})}
	c.m[id] = c.lru.PushFront(e)
	for c.lru.Len() > c.size {
		old := c.lru.Back()
		oe := old.Value.(*resultEntry)
		select {
		case <-oe.done:
			c.lru.Remove(old)
			delete(c.m, oe.id)
		default:
			return e, true // never evict an in-flight entry
		}
	}
	return e, true
}

// settle records the leader's outcome; a failed invocation (err != nil)
// leaves nothing to replay.
func (c *resultCache) settle(id string, e *resultEntry, res *InvocationResult, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil && res != nil {
		cp := *res
		e.res = &cp
		e.at = time.Now()
	} else if el, ok := c.m[id]; ok && el.Value == e {
		c.lru.Remove(el)
		delete(c.m, id)
	}
	close(e.done)
}
