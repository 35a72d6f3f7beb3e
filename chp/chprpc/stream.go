package chprpc

import (
	"context"
	"encoding/json"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/jsonrpc"
)

// Streaming over JSON-RPC (docs/chp-jsonrpc-binding.md "Streaming"): on a
// stream connection, chp.invoke with mode "stream" sends each chunk as a
// ChunkMethod notification before answering the request with the terminal
// InvocationResult. params.last_event_id (beside the envelope's members)
// resumes a recorded stream after that chunk, as the HTTP binding's
// Last-Event-ID does.

// ChunkMethod is the notification carrying one chunk of a streaming
// chp.invoke.
const ChunkMethod = "chp.chunk"

// Chunk is the params of a ChunkMethod notification.
type Chunk struct {
	// InvocationID is the streaming invocation's id (the envelope's, or the
	// one the host drew for it).
	InvocationID string `json:"invocation_id"`
	// ID is the chunk's 0-based index in the stream.
	ID int `json:"id"`
	// Delta is the chunk's JSON value.
	Delta json.RawMessage `json:"delta"`
}

// invokeStream answers a mode "stream" chp.invoke. Without a notifier (a
// call over the HTTP bridge) there is nowhere to send chunks: the
// invocation runs as Invoke runs it, answering the terminal data.
func invokeStream(ctx context.Context, b *boundary.Boundary, req *jsonrpc.Request, env *chp.InvocationEnvelope) (any, error) {
	n, ok := jsonrpc.NotifierFromContext(ctx)
	if !ok {
		res, err := b.Invoke(ctx, env)
		if err != nil {
			return nil, evidenceError(err)
		}
		return res, nil
	}
	var p struct {
		LastEventID *int `json:"last_event_id"`
	}
	if err := json.Unmarshal(req.Params, &p); err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.InvalidParams, "%v", err)
	}
	after := -1
	if p.LastEventID != nil && *p.LastEventID >= 0 {
		after = *p.LastEventID
	}
	sink := func(seq int, delta json.RawMessage) error {
		return n.Notify(ctx, ChunkMethod, Chunk{InvocationID: env.InvocationID, ID: seq, Delta: delta})
	}
	res, err := b.InvokeStream(ctx, env, after, sink)
	if err != nil {
		return nil, evidenceError(err)
	}
	return res, nil
}
