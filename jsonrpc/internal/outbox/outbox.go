// Package outbox is the write side of one stream connection of package
// jsonrpc's Server: the framed replies not yet written, the in-flight
// slots they hold, the reply bytes they count against the connection's
// budget, and the scheduling of their writes.
//
// The reader goroutine takes a slot per call (Acquire) and marks itself
// active while it works through buffered input: replies completed
// meanwhile are appended without a write, so that the replies to a
// pipelined burst share system calls. Before the reader waits for input it
// goes idle (GoIdle), writing everything pending; from then on a completed
// reply is written by the goroutine that produced it. Writes go out in
// 64 KiB pieces, each under its own deadline, and then release the slots
// of the replies they carried.
package outbox

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Flush says when Add writes what it appended.
type Flush int

const (
	// Later leaves the write to the reader, which writes before it next
	// waits for input (replies the reader produces itself).
	Later Flush = iota
	// UnlessActive writes at once unless the reader is active (replies
	// of handlers running on their own goroutines).
	UnlessActive
	// Now writes at once (the last words on a connection).
	Now
)

// writeChunk is the most a single write carries; each write has its own
// deadline, so a peer that reads slowly but steadily gets a long reply
// whole while one that stops reading is cut off after the timeout.
const writeChunk = 64 << 10

// Outbox is the write side of one connection.
type Outbox struct {
	nc      net.Conn
	timeout time.Duration
	// onFail is told of a failed write (once per failed flush, without the
	// lock held); it closes the connection.
	onFail func(error)

	// inflight counts calls being handled or whose replies are not yet
	// written; only the reader increments it, flushes decrement it, and
	// room wakes a reader waiting for it to drop below maxIn.
	inflight atomic.Int32
	maxIn    int32
	room     chan struct{}

	mu      sync.Mutex
	pending []byte // framed replies not yet written
	// held counts the reply bytes the connection holds against its reply
	// budget: pending, being written, or kept by running batches.
	held    atomic.Int64
	slots   int // in-flight slots to release once pending is written
	writing bool
	active  bool // the reader is working through buffered input and will flush before it blocks
	spare   []byte
	werr    error
}

// Init makes o, a zero Outbox, the outbox of nc: at most maxInFlight
// slots, each write under timeout, onFail told of a failed write. (An
// Outbox lives inside its connection's state, so it is not returned by a
// constructor.)
func (o *Outbox) Init(nc net.Conn, maxInFlight int, timeout time.Duration, onFail func(error)) {
	o.nc, o.timeout, o.onFail = nc, timeout, onFail
	o.maxIn, o.room = int32(maxInFlight), make(chan struct{}, 1)
}

// Held is the count of reply bytes the connection holds; batches running
// on the connection add the results they keep to it.
func (o *Outbox) Held() *atomic.Int64 { return &o.held }

// InFlight is the number of slots taken.
func (o *Outbox) InFlight() int32 { return o.inflight.Load() }

// Acquire takes an in-flight slot on the reader goroutine. When every
// slot is taken — possibly by replies the reader queued itself and has not
// written yet — it writes those first, then waits; once done is closed (the
// connection is being torn down, and the write that would free a slot may
// never come) it takes the slot without waiting.
func (o *Outbox) Acquire(done <-chan struct{}) {
	for o.inflight.Load() >= o.maxIn {
		// Going to wait: stop deferring writes to the reader, or the
		// replies whose writes free the slots would never go out.
		o.GoIdle()
		if o.inflight.Load() < o.maxIn {
			break
		}
		select {
		case <-o.room:
		case <-done:
			o.inflight.Add(1)
			return
		}
	}
	o.Activate()
	o.inflight.Add(1)
}

// Activate marks the reader as working through buffered input (reader
// goroutine only, which alone sets active: its read needs no lock).
func (o *Outbox) Activate() {
	if !o.active {
		o.activate()
	}
}

func (o *Outbox) activate() {
	o.mu.Lock()
	o.active = true
	o.mu.Unlock()
}

// release frees n slots and wakes the reader if it waits for one.
func (o *Outbox) release(n int) {
	if n == 0 {
		return
	}
	o.inflight.Add(-int32(n))
	select {
	case o.room <- struct{}{}:
	default:
	}
}

// GoIdle marks the reader as about to block and writes everything
// pending: from now on completing handlers write their own replies.
func (o *Outbox) GoIdle() {
	o.mu.Lock()
	o.active = false
	if len(o.pending) == 0 && o.slots == 0 {
		o.mu.Unlock()
		return
	}
	o.flushLocked()
}

// FlushQueued writes the replies the reader queued, leaving it active.
func (o *Outbox) FlushQueued() {
	o.mu.Lock()
	if len(o.pending) == 0 && o.slots == 0 {
		o.mu.Unlock()
		return
	}
	o.flushLocked()
}

// OverBudget reports whether n more reply bytes would take the bytes the
// connection holds past budget.
func (o *Outbox) OverBudget(n, budget int) bool {
	return o.held.Load()+int64(n) > int64(budget)
}

// Add appends a reply under the lock: add appends it, framed, to the
// pending bytes it is given, and returns them with the count of bytes
// held elsewhere (a batch's kept results) that the reply now stands for.
// The reply holds slots in-flight slots until it is written; flush says
// when that is.
func (o *Outbox) Add(add func(pending []byte) ([]byte, int64), slots int, flush Flush) {
	o.mu.Lock()
	n := len(o.pending)
	var uncount int64
	o.pending, uncount = add(o.pending)
	// One step, so that other batches never see the bytes uncounted.
	o.held.Add(int64(len(o.pending)-n) - uncount)
	o.slots += slots
	switch {
	case flush == Later, flush == UnlessActive && o.active:
		o.mu.Unlock()
	default:
		o.flushLocked()
	}
}

// Post appends a message framed by add and writes it at once. It appends
// nothing when a write already failed (failed is that error), or when more
// than max bytes are already pending: the peer is not reading, slow is
// recorded as the connection's failure and reported, and the caller closes
// the connection.
func (o *Outbox) Post(add func(pending []byte) []byte, max int, slow error) (failed error, isSlow bool) {
	o.mu.Lock()
	if o.werr != nil {
		err := o.werr
		o.mu.Unlock()
		return err, false
	}
	if len(o.pending) > max {
		o.werr = slow
		o.mu.Unlock()
		return nil, true
	}
	n := len(o.pending)
	o.pending = add(o.pending)
	o.held.Add(int64(len(o.pending) - n))
	o.flushLocked()
	return nil, false
}

// flushLocked writes everything pending unless another goroutine is
// already doing so. Called with mu held; returns with it released.
func (o *Outbox) flushLocked() {
	if o.writing {
		o.mu.Unlock()
		return
	}
	o.writing = true
	for len(o.pending) > 0 || o.slots > 0 {
		buf, n := o.pending, o.slots
		o.pending, o.slots = o.spare[:0], 0
		o.spare = nil
		err := o.werr
		o.mu.Unlock()
		if len(buf) > 0 && err == nil {
			if err = o.write(buf); err != nil {
				o.onFail(err)
			}
		}
		o.held.Add(-int64(len(buf)))
		o.release(n)
		o.mu.Lock()
		if err != nil && o.werr == nil {
			o.werr = err
		}
		if cap(buf) <= 1<<20 {
			o.spare = buf[:0]
		}
	}
	o.writing = false
	o.mu.Unlock()
}

// write writes buf in chunks of at most writeChunk, each under its own
// write deadline.
func (o *Outbox) write(buf []byte) error {
	for len(buf) > 0 {
		n := min(len(buf), writeChunk)
		_ = o.nc.SetWriteDeadline(time.Now().Add(o.timeout))
		k, err := o.nc.Write(buf[:n])
		buf = buf[k:]
		if err != nil {
			return err
		}
	}
	return nil
}
