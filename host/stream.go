package host

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/jsonrpc"
)

// A Stream sends the chunks of a streaming capability's answer
// (RegisterStream), in order, before its terminal result.
type Stream struct {
	send func(json.RawMessage) error
}

// Send encodes v as JSON and sends it as the next chunk. It fails when v
// does not encode or the invocation has ended. A caller that goes away does
// not fail it: the invocation runs to its end and its chunks stay
// resumable, so a handler need not watch for that (its context still
// carries the capability's Timeout).
func (s *Stream) Send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("host: stream chunk: %w", err)
	}
	return s.send(b)
}

// RegisterStream adds a streaming capability: like Register, with a
// handler that sends chunks through a Stream before returning the terminal
// result. The capability declares modes ["sync", "stream"]: a chp.invoke
// (or POST /invoke) with mode "stream" receives the chunks as they are sent
// — SSE chunk frames over HTTP, chp.chunk notifications over JSON-RPC — and
// then the result; execution_completed commits their count and
// chp-chunk-seq-v1 digest, and a retried invocation_id replays them. In
// sync mode, and in direct calls of the method, the chunks are dropped and
// the terminal result is the answer. Out's schema is the terminal
// result's; chunks have none.
func RegisterStream[In, Out any](h *Host, method string, fn func(ctx context.Context, in In, s *Stream) (Out, error), opts ...CapOption) error {
	if fn == nil {
		return fmt.Errorf("host: %s: nil handler", method)
	}
	in, err := InferSchema(reflect.TypeFor[In]())
	if err != nil {
		return fmt.Errorf("host: %s: params type: %w", method, err)
	}
	if in != nil && !objectLike(reflect.TypeFor[In]()) {
		return fmt.Errorf("host: %s: params type %v: want a struct, a map with string keys, json.RawMessage or any (params are a JSON object)", method, reflect.TypeFor[In]())
	}
	out, err := InferSchema(reflect.TypeFor[Out]())
	if err != nil {
		return fmt.Errorf("host: %s: result type: %w", method, err)
	}
	stream := func(ctx context.Context, payload json.RawMessage, send func(json.RawMessage) error) (json.RawMessage, error) {
		var v In
		if err := json.Unmarshal(payload, &v); err != nil {
			return nil, noteCode(ctx, jsonrpc.Errorf(jsonrpc.InvalidParams, "Invalid params: %v", err))
		}
		res, err := fn(ctx, v, &Stream{send: send})
		if err != nil {
			return nil, noteCode(ctx, err)
		}
		return json.Marshal(res)
	}
	syncFn := func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
		return stream(ctx, payload, func(json.RawMessage) error { return nil })
	}
	return h.registerCHP(method, syncFn, in, out, append(slices.Clone(opts), streaming(stream)))
}

// streaming makes a capability streaming: stream answers mode "stream",
// which the descriptor declares beside sync.
func streaming(stream boundary.StreamHandler) CapOption {
	return func(o *capOptions) {
		o.stream = stream
		for _, m := range []string{"sync", "stream"} {
			if !slices.Contains(o.desc.Modes, m) {
				o.desc.Modes = append(o.desc.Modes, m)
			}
		}
	}
}
