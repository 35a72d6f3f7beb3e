// Package streamrec records the chunks of the boundary's streaming
// invocations (chp-http-binding.md "Streaming invocations", chp-v0.2.md
// §13.1, proposals 0006 and 0012): serving state, never evidence.
//
// Data flow: boundary.InvokeStream makes a Run around the consumer's sink →
// the capability's StreamHandler calls Run.Send per delta, which digests it
// (chp-chunk-seq-v1), records it and hands it to the sink → Run.Completed
// adds chunk_count and chunk_seq_digest to execution_completed and yields
// the deltas, which the boundary Puts in its Cache beside the replay cache
// → a retried invocation_id, or a Last-Event-ID reconnect, Gets them to
// re-stream or resume.
package streamrec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/capmesh/capmesh/chp"
)

// Stream limits: a stream over either is still digested and answered, but
// recorded non-resumable (§13.1 permits the cap); the cache as a whole
// keeps at most cacheBytes of deltas, dropping the oldest streams.
const (
	maxChunks  = 10000
	maxBytes   = 8 << 20
	cacheBytes = 64 << 20
)

// Evidence members (execution_completed, execution_failed payload) that say
// the consumer went away mid-stream: how many chunks had been passed to it
// when its sink failed. Package boundary exports them.
const (
	DisconnectedKey = "io.github.capmesh.client_disconnected"
	ChunksSentKey   = "io.github.capmesh.chunks_sent"
)

// ErrEnded is Send's error once the invocation has ended.
var ErrEnded = errors.New("boundary: stream chunk sent after the invocation ended")

// Run is the state of one streaming execution.
type Run struct {
	client context.Context // the consumer's context: done means gone
	sink   func(seq int, delta json.RawMessage) error

	mu     sync.Mutex
	seq    *chp.ChunkSeq
	deltas []json.RawMessage // recorded for replay; nil once over a cap
	bytes  int
	over   bool
	gone   bool
	sent   int
	ended  bool
}

// NewRun returns the Run of a stream whose consumer is client (done: gone)
// and sink (an error: gone; see boundary.ChunkSink).
func NewRun(client context.Context, sink func(seq int, delta json.RawMessage) error) *Run {
	return &Run{client: client, sink: sink, seq: chp.NewChunkSeq()}
}

// Send is the StreamHandler's send: it digests and records delta and
// passes it to the sink while the consumer is there. It fails only for a
// delta that is not JSON, or with ErrEnded.
func (s *Run) Send(delta json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Compact(&buf, delta); err != nil {
		return err
	}
	d := json.RawMessage(buf.Bytes())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return ErrEnded
	}
	if err := s.seq.Add(d); err != nil {
		return err
	}
	i := s.seq.Count() - 1
	if !s.over {
		s.bytes += len(d)
		if s.seq.Count() > maxChunks || s.bytes > maxBytes {
			s.over, s.deltas = true, nil
		} else {
			s.deltas = append(s.deltas, d)
		}
	}
	if !s.gone {
		if s.client.Err() != nil || s.sink(i, d) != nil {
			s.gone = true
		} else {
			s.sent++
		}
	}
	return nil
}

// End stops further sends from reaching the sink (a handler that outlived
// its timeout may still call Send).
func (s *Run) End() {
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
}

// Completed adds the stream's members to an execution_completed payload
// and returns the chunks to record for replay (nil: none, or over a cap).
// A nil Run (no stream) changes nothing.
func (s *Run) Completed(payload map[string]any) (map[string]any, []json.RawMessage) {
	if s == nil {
		return payload, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var record []json.RawMessage
	if n := s.seq.Count(); n > 0 {
		payload = withMember(payload, chp.ChunkCountKey, n)
		payload[chp.ChunkSeqDigestKey] = s.seq.Digest()
		if !s.over {
			record = s.deltas
		}
	}
	return s.disconnect(payload), record
}

// Failed is the execution_failed payload of a stream (nil: none).
func (s *Run) Failed() map[string]any {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.disconnect(nil)
}

// disconnect adds the disconnect members when the consumer went away.
// s.mu is held.
func (s *Run) disconnect(payload map[string]any) map[string]any {
	if !s.gone {
		return payload
	}
	payload = withMember(payload, DisconnectedKey, true)
	payload[ChunksSentKey] = s.sent
	return payload
}

func withMember(m map[string]any, k string, v any) map[string]any {
	if m == nil {
		m = make(map[string]any, 4)
	}
	m[k] = v
	return m
}

// Cache keeps the recorded chunks of completed streams for replay and
// resume: serving state beside the replay cache, window-bounded like it,
// and bounded in bytes (the oldest streams go first). Its zero value is
// empty and ready.
type Cache struct {
	mu    sync.Mutex
	m     map[string]*streamLog
	order []string // ids in the order recorded
	bytes int
}

type streamLog struct {
	deltas []json.RawMessage
	size   int
	at     time.Time
}

// Put records the chunks of stream id at now, first forgetting the streams
// recorded more than window ago, and keeps at most maxN streams.
func (c *Cache) Put(id string, deltas []json.RawMessage, now time.Time, window time.Duration, maxN int) {
	size := 0
	for _, d := range deltas {
		size += len(d)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]*streamLog)
	}
	for len(c.order) > 0 && (c.m[c.order[0]] == nil || now.Sub(c.m[c.order[0]].at) > window) {
		c.dropOldest()
	}
	if old := c.m[id]; old != nil {
		c.bytes -= old.size
	} else {
		c.order = append(c.order, id)
	}
	c.m[id] = &streamLog{deltas: deltas, size: size, at: now}
	c.bytes += size
	for (c.bytes > cacheBytes || len(c.m) > maxN) && len(c.order) > 1 {
		c.dropOldest()
	}
}

// dropOldest forgets the oldest recorded stream. c.mu is held.
func (c *Cache) dropOldest() {
	id := c.order[0]
	c.order[0] = ""
	c.order = c.order[1:]
	if l := c.m[id]; l != nil {
		c.bytes -= l.size
		delete(c.m, id)
	}
}

// Get returns the recorded chunks of id (nil: none, or expired after
// window).
func (c *Cache) Get(id string, now time.Time, window time.Duration) []json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.m[id]
	if l == nil || now.Sub(l.at) > window {
		return nil
	}
	return l.deltas
}
