package host

import (
	"context"
	"sync"
	"time"

	"github.com/capmesh/capmesh/jsonrpc"
)

// drainer counts the calls in flight and, once draining, refuses new ones
// (GD-01) and tells the waiter when the last one has finished.
type drainer struct {
	mu       sync.Mutex
	inflight int
	on       bool
	idle     chan struct{} // closed when on && inflight == 0
}

func (d *drainer) init() { d.idle = make(chan struct{}) }

// enter admits a call unless the host is draining.
func (d *drainer) enter() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.on {
		return false
	}
	d.inflight++
	return true
}

func (d *drainer) leave() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inflight--
	if d.on && d.inflight == 0 {
		closeOnce(d.idle)
	}
}

// start begins draining; it reports whether this call started it and how
// many calls were in flight.
func (d *drainer) start() (started bool, inflight int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.on {
		return false, d.inflight
	}
	d.on = true
	if d.inflight == 0 {
		closeOnce(d.idle)
	}
	return true, d.inflight
}

func (d *drainer) draining() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.on
}

// wait blocks until the calls in flight are done or ctx ends.
func (d *drainer) wait(ctx context.Context) error {
	select {
	case <-d.idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

// errDraining is the GD-01 answer to a call that arrives while draining.
var errDraining = &jsonrpc.Error{Code: jsonrpc.ServiceDraining, Message: "Service draining"}

// guard wraps a handler of work (a capability, a mounted method) so that
// it is counted in flight and refused once the host drains.
func (h *Host) guard(hd jsonrpc.Handler) jsonrpc.Handler {
	return jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		if !h.drain.enter() {
			return nil, errDraining
		}
		defer h.drain.leave()
		return hd.Handle(ctx, req)
	})
}

// drainParams are the params of health.drain.
type drainParams struct {
	// TimeoutMS bounds the wait for calls in flight, in milliseconds.
	// Required, so that a probe calling every method with {} does not
	// stop the host.
	TimeoutMS *int64 `json:"timeout_ms"`
}

// DrainResult is the result of health.drain.
type DrainResult struct {
	// Draining is true: the host refuses new work from now on.
	Draining bool `json:"draining"`
	// InFlight is the number of calls still running when drain began.
	InFlight int `json:"in_flight"`
	// TimeoutMS is how long the host waits for them before it stops.
	TimeoutMS int64 `json:"timeout_ms"`
}

// maxDrainTimeout bounds health.drain's timeout_ms.
const maxDrainTimeout = 10 * time.Minute

// drainRPC implements health.drain {timeout_ms}: from now on every
// capability and mounted method answers -32000 "Service draining"
// (observability methods keep answering); once the calls in flight finish,
// or timeout_ms passes, Serve shuts the host down and returns. Only the
// host's own user may ask, over its Unix socket: anyone else could stop the
// host.
func (h *Host) drainRPC(ctx context.Context, req *jsonrpc.Request) (any, error) {
	var p drainParams
	if err := req.UnmarshalParamsStrict(&p); err != nil {
		return nil, err
	}
	if p.TimeoutMS == nil {
		return nil, jsonrpc.Errorf(jsonrpc.InvalidParams, "Invalid params: timeout_ms is required")
	}
	if *p.TimeoutMS < 0 || time.Duration(*p.TimeoutMS)*time.Millisecond > maxDrainTimeout {
		return nil, jsonrpc.Errorf(jsonrpc.InvalidParams, "Invalid params: timeout_ms must be between 0 and %d", maxDrainTimeout.Milliseconds())
	}
	if !ownPeer(ctx) {
		return nil, jsonrpc.Errorf(CodeForbidden, "health.drain is accepted only from the host's own user over its Unix socket")
	}
	timeout := time.Duration(*p.TimeoutMS) * time.Millisecond
	started, inflight := h.drain.start()
	if started {
		h.log.Info("draining on request", "in_flight", inflight, "timeout", timeout)
		go func() {
			wctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			if err := h.drain.wait(wctx); err != nil {
				h.log.Warn("drain timeout reached with calls still in flight")
			}
			closeOnce(h.stop)
		}()
	}
	return DrainResult{Draining: true, InFlight: inflight, TimeoutMS: *p.TimeoutMS}, nil
}
