package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
)

// relay passes the notifications a provider sends during one routed call
// (MCP progress, CHP chunks, …) to the caller's stream connection,
// unchanged and in order, until the provider's answer (docs/routing.md,
// "Notifications during a routed call").
//
// forward runs on the reader of the router's connection to the provider
// and writes each notification to the caller before it reads the next
// frame: a caller that reads slowly slows the provider (backpressure), the
// router buffers nothing of its own, and every notification the provider
// sent before its answer reaches the caller before the answer does. A
// caller that stops reading is cut off by its connection's write timeout
// or slow-consumer limit (jsonrpc.ServerOptions), which ends the routed
// call; nothing is dropped silently.
type relay struct {
	to  jsonrpc.Notifier
	ctx context.Context
	log *slog.Logger

	mu     sync.Mutex
	closed bool // the answer came: nothing more is relayed
	failed bool // a notification could not be written (logged once)
	sent   int  // notifications relayed
}

// newRelay returns the relay for a routed call whose caller is on ctx's
// stream connection, or nil when the caller has no notification channel
// (the HTTP bridge).
func newRelay(ctx context.Context, log *slog.Logger) *relay {
	to, ok := jsonrpc.NotifierFromContext(ctx)
	if !ok {
		return nil
	}
	if log == nil {
		log = slog.Default()
	}
	return &relay{to: to, ctx: ctx, log: log}
}

// dialContext is ctx for Config.Dial: with the relay's forward as the
// connection's notification callback (endpoint.WithNotify, which
// registry.DialEndpoint honours), or ctx itself for a nil relay.
func (r *relay) dialContext(ctx context.Context) context.Context {
	if r == nil {
		return ctx
	}
	return endpoint.WithNotify(ctx, r.forward)
}

// forward writes one notification of the provider to the caller. It holds
// the relay's lock while it writes, so that close waits for a write in
// progress and the caller never sees a notification after the answer.
func (r *relay) forward(method string, params json.RawMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	var p any
	if len(params) > 0 {
		p = params
	}
	err := r.to.Notify(r.ctx, method, p)
	if err == nil {
		r.sent++
		return
	}
	if !r.failed {
		r.failed = true
		r.log.Warn("router: a provider's notification could not be relayed to the caller", "method", method, "err", err)
	}
}

// started reports whether the caller has been sent a notification of the
// call: the call has visibly begun at a provider, and the router no
// longer fails it over to another one (which would repeat its progress or
// chunks).
func (r *relay) started() bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent > 0
}

// close stops the relay once the provider's answer is in: nothing the
// provider sends afterwards reaches the caller.
func (r *relay) close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}
