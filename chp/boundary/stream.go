package boundary

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary/internal/streamrec"
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
// them and a Last-Event-ID reconnect resumes from the next one. The
// recording (limits, digest, disconnect, cache) is package streamrec's.

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

// Evidence members (execution_completed, execution_failed payload) that say
// the consumer went away mid-stream: how many chunks had been passed to it
// when its sink failed.
const (
	DisconnectedKey = streamrec.DisconnectedKey
	ChunksSentKey   = streamrec.ChunksSentKey
)

// streamCompleted adds inv's stream members (if it streams) to an
// execution_completed payload and records its chunks for replay.
func (b *Boundary) streamCompleted(inv *invocation, payload map[string]any) map[string]any {
	payload, deltas := inv.stream.Completed(payload)
	if deltas != nil {
		b.streams.Put(inv.env.InvocationID, deltas, b.now(), b.cfg.ResultWindow, b.cfg.ResultCacheSize)
	}
	return payload
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
	run := streamrec.NewRun(ctx, sink)
	inv := &invocation{stream: run}
	res, err := b.invokeIn(context.WithoutCancel(ctx), inv, env, caller)
	run.End()
	if err != nil || res == nil || !res.Replayed {
		return res, err
	}
	deltas := b.streams.Get(env.InvocationID, b.now(), b.cfg.ResultWindow)
	for i := max(after+1, 0); i < len(deltas); i++ {
		if ctx.Err() != nil || sink(i, deltas[i]) != nil {
			break
		}
	}
	return res, nil
}
