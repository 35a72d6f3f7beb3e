package boundary

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/capmesh/capmesh/chp"
)

// Streaming invocations (chp-http-binding.md "Streaming invocations",
// chp-v0.2.md §13.1, proposals 0006 and 0012).
//
// Data flow: a binding calls InvokeStream with a ChunkSink → the same gate
// pipeline as Invoke (gate 0 replay included) → execute runs the
// capability's StreamHandler, whose send digests each delta
// (chp-chunk-seq-v1), records it and hands it to the sink → the terminal
// result; execution_completed carries chunk_count and chunk_seq_digest. The
// recorded deltas stay in a window-bounded cache beside the replay cache
// (serving state, never evidence), so a retried invocation_id re-streams
// them and a Last-Event-ID reconnect resumes from the next one.

// StreamHandler executes a streaming capability: it passes each chunk's
// delta (a JSON value) to send, in order, and returns the terminal result
// data as a Handler does. send fails only for a delta that is not JSON or
// once the invocation has ended; a consumer that goes away does not fail
// it — the invocation runs to its end so that its chunks can be resumed.
// send is safe for concurrent use, but chunks are numbered in the order
// send is called.
type StreamHandler func(ctx context.Context, payload json.RawMessage, send func(delta json.RawMessage) error) (json.RawMessage, error)

// A ChunkSink receives the chunks of a streaming invocation as they are
// produced (or replayed): seq is the chunk's 0-based absolute index, delta
// its compact JSON. A sink's first call is the moment a binding commits to
// a stream; an outcome reached before it is answered as a plain result. An
// error means the consumer is gone: no further chunks are passed, and the
// evidence records the disconnect. The sink is not called concurrently.
type ChunkSink func(seq int, delta json.RawMessage) error

// Stream limits: a stream over either is still digested and answered, but
// recorded non-resumable (§13.1 permits the cap); the cache as a whole
// keeps at most streamCacheBytes of deltas, dropping the oldest streams.
const (
	maxStreamChunks  = 10000
	maxStreamBytes   = 8 << 20
	streamCacheBytes = 64 << 20
)

// Evidence members (execution_completed, execution_failed payload) that say
// the consumer went away mid-stream: how many chunks had been passed to it
// when its sink failed.
const (
	DisconnectedKey = "io.github.capmesh.client_disconnected"
	ChunksSentKey   = "io.github.capmesh.chunks_sent"
)

var errStreamEnded = errors.New("boundary: stream chunk sent after the invocation ended")

// streamRun is the state of one streaming execution.
type streamRun struct {
	client context.Context // the consumer's context: done means gone
	sink   ChunkSink

	mu     sync.Mutex
	seq    *chp.ChunkSeq
	deltas []json.RawMessage // recorded for replay; nil once over a cap
	bytes  int
	over   bool
	gone   bool
	sent   int
	ended  bool
}

// send is the StreamHandler's send.
func (s *streamRun) send(delta json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Compact(&buf, delta); err != nil {
		return err
	}
	d := json.RawMessage(buf.Bytes())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return errStreamEnded
	}
	if err := s.seq.Add(d); err != nil {
		return err
	}
	i := s.seq.Count() - 1
	if !s.over {
		s.bytes += len(d)
		if s.seq.Count() > maxStreamChunks || s.bytes > maxStreamBytes {
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

// end stops further sends from reaching the sink (a handler that outlived
// its timeout may still call send).
func (s *streamRun) end() {
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
}

// completed adds the stream's members to an execution_completed payload
// and records its chunks for replay. A nil run (no stream) changes nothing.
func (s *streamRun) completed(b *Boundary, invID string, payload map[string]any) map[string]any {
	if s == nil {
		return payload
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.seq.Count(); n > 0 {
		payload = withMember(payload, chp.ChunkCountKey, n)
		payload[chp.ChunkSeqDigestKey] = s.seq.Digest()
		if !s.over {
			b.streams.put(invID, s.deltas, b.now(), b.cfg.ResultWindow, b.cfg.ResultCacheSize)
		}
	}
	return s.disconnect(payload)
}

// failed is the execution_failed payload of a stream (nil: none).
func (s *streamRun) failed() map[string]any {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.disconnect(nil)
}

// disconnect adds the disconnect members when the consumer went away.
// s.mu is held.
func (s *streamRun) disconnect(payload map[string]any) map[string]any {
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

// collect adapts a StreamHandler to a Handler (sync mode, and a stream
// without a sink): the chunks are produced and dropped, the terminal data
// is the result.
func collect(h StreamHandler) Handler {
	return func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
		return h(ctx, payload, func(delta json.RawMessage) error {
			if !json.Valid(delta) {
				return errors.New("boundary: stream chunk is not JSON")
			}
			return nil
		})
	}
}

// InvokeStream runs env (mode "stream") through the gate pipeline as Invoke
// does, passing the chunks of a StreamHandler to sink as they are produced.
// An invocation_id already recorded is replayed: its recorded chunks after
// index after (-1: all; a Last-Event-ID reconnect passes the last id it
// saw) are passed to sink, then its recorded result is returned with
// replayed set. A result returned before sink was first called (a denial,
// a skip, a sync handler, a failure before the first chunk, a resume past
// the last chunk) is to be answered as a plain result.
//
// The consumer going away (ctx done, or sink failing) does not stop the
// invocation: it runs to its end, its chunks are recorded for resume, and
// its evidence says how many chunks were sent. A mode other than "stream"
// is Invoke.
func (b *Boundary) InvokeStream(ctx context.Context, env *chp.InvocationEnvelope, after int, sink ChunkSink) (*chp.InvocationResult, error) {
	if env == nil || env.Mode != "stream" || sink == nil {
		return b.Invoke(ctx, env)
	}
	caller, _ := CallerFromContext(ctx)
	run := &streamRun{client: ctx, sink: sink, seq: chp.NewChunkSeq()}
	inv := &invocation{stream: run}
	res, err := b.invokeIn(context.WithoutCancel(ctx), inv, env, caller)
	run.end()
	if err != nil || res == nil || !res.Replayed {
		return res, err
	}
	deltas := b.streams.get(env.InvocationID, b.now(), b.cfg.ResultWindow)
	for i := max(after+1, 0); i < len(deltas); i++ {
		if ctx.Err() != nil || sink(i, deltas[i]) != nil {
			break
		}
	}
	return res, nil
}

// streamCache keeps the recorded chunks of completed streams for replay and
// resume: serving state beside the replay cache, window-bounded like it,
// and bounded in bytes (the oldest streams go first).
type streamCache struct {
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

// put records the chunks of stream id at now, first forgetting the streams
// recorded more than window ago, and keeps at most maxN streams.
func (c *streamCache) put(id string, deltas []json.RawMessage, now time.Time, window time.Duration, maxN int) {
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
	for (c.bytes > streamCacheBytes || len(c.m) > maxN) && len(c.order) > 1 {
		c.dropOldest()
	}
}

// dropOldest forgets the oldest recorded stream. c.mu is held.
func (c *streamCache) dropOldest() {
	id := c.order[0]
	c.order[0] = ""
	c.order = c.order[1:]
	if l := c.m[id]; l != nil {
		c.bytes -= l.size
		delete(c.m, id)
	}
}

// get returns the recorded chunks of id (nil: none, or expired after
// window).
func (c *streamCache) get(id string, now time.Time, window time.Duration) []json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.m[id]
	if l == nil || now.Sub(l.at) > window {
		return nil
	}
	return l.deltas
}
