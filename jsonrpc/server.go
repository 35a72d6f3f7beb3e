package jsonrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capmesh/capmesh/jsonrpc/channel"
	"github.com/capmesh/capmesh/jsonrpc/internal/connbudget"
	"github.com/capmesh/capmesh/jsonrpc/internal/jsontext"
	"github.com/capmesh/capmesh/jsonrpc/internal/outbox"
	"github.com/capmesh/capmesh/jsonrpc/internal/sysconn"
	"github.com/capmesh/capmesh/jsonrpc/internal/workers"
)

// ServerOptions configure a Server. A nil *ServerOptions, and every zero
// field, means the default stated on the field.
type ServerOptions struct {
	// Framing of stream connections. Default channel.Newline.
	Framing channel.Framing
	// MaxMessageBytes bounds one incoming frame (a request or a batch).
	// An over-long frame is answered with InvalidRequest naming the limit,
	// then the connection is closed. Default 4 MiB.
	MaxMessageBytes int
	// MaxInFlight bounds the requests of one connection that are being
	// handled or whose responses are not yet written; the connection is not
	// read while the bound is reached, so a peer that stops reading its
	// responses cannot grow server memory. Default 64.
	MaxInFlight int
	// MaxConns bounds the connections of the server, all its listeners
	// together (stream connections and, through Listener, HTTP ones);
	// one more is answered with ServerBusy and closed. It is lowered to fit
	// the process's file descriptor limit (RLIMIT_NOFILE less 128 for
	// everything else the process opens). Default 1024.
	MaxConns int
	// OwnerReserve is the part of MaxConns only owner peers may use: Unix
	// socket peers whose kernel-reported uid is the server's own. Other
	// peers (TCP, HTTP, other users) are refused once MaxConns-OwnerReserve
	// connections are open, so they cannot lock the owner out of its own
	// socket. Default 64, at most MaxConns/2.
	OwnerReserve int
	// IdleTimeout closes a connection that sent nothing and has nothing in
	// flight for this long. Default 5 minutes; negative disables it.
	IdleTimeout time.Duration
	// LineTimeout bounds the time a peer takes to complete a message once
	// its first byte arrived (a stalled or byte-by-byte line, a slow HTTP
	// body); the connection is then answered InvalidRequest and closed.
	// Default 30 seconds; negative disables it.
	LineTimeout time.Duration
	// HeaderTimeout bounds reading an HTTP request's headers. Default 10
	// seconds.
	HeaderTimeout time.Duration
	// WriteTimeout bounds each write of at most 64 KiB to a connection: a
	// peer that reads nothing for this long is disconnected, one that
	// reads slowly gets every reply whole. Default 10 seconds.
	WriteTimeout time.Duration
	// MaxBatch bounds the elements of a batch; a longer batch is answered
	// with one InvalidRequest error (id null) and none of it is run.
	// Default 1024.
	MaxBatch int
	// MaxReplyBytes bounds the reply bytes a connection may have waiting
	// to be written. A reply (a response, or a whole batch response) that
	// would exceed it is not built or queued: the call is answered with
	// ResponseTooLarge instead, which keeps a peer that does not read, or
	// a small request with a huge answer, from costing unbounded memory.
	// Default 16 MiB.
	MaxReplyBytes int
	// DrainTimeout bounds how long Serve waits for in-flight calls when its
	// context ends. Default 10 seconds.
	DrainTimeout time.Duration
	// Logger receives connection errors and handler panics. Default
	// slog.Default().
	Logger *slog.Logger
	// ConnGate, when set, sees the first frame of every stream connection
	// before it is dispatched. A non-nil *Error is written as a response
	// with id null and the connection is closed. Hosts use it to answer a
	// plaintext JSON-RPC message on a socket that requires a secure
	// handshake.
	ConnGate func(ctx context.Context, peer Peer, first []byte) *Error
	// Observer, when set, receives requests, connections and refusals for
	// metrics (package telemetry implements it). Nil costs nothing.
	Observer Observer
}

// withDefaults returns the options with every zero field — every field, for
// a nil o — set to the default its doc states.
func (o *ServerOptions) withDefaults() ServerOptions {
	var d ServerOptions
	if o != nil {
		d = *o
	}
	if d.Framing == nil {
		d.Framing = channel.Newline
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	d.MaxMessageBytes = positiveOr(d.MaxMessageBytes, 4<<20)
	d.MaxInFlight = positiveOr(d.MaxInFlight, 64)
	d.MaxConns = positiveOr(d.MaxConns, 1024)
	d.OwnerReserve = min(positiveOr(d.OwnerReserve, 64), d.MaxConns/2)
	d.MaxBatch = positiveOr(d.MaxBatch, 1024)
	d.MaxReplyBytes = positiveOr(d.MaxReplyBytes, 16<<20)
	d.HeaderTimeout = positiveOr(d.HeaderTimeout, 10*time.Second)
	d.WriteTimeout = positiveOr(d.WriteTimeout, 10*time.Second)
	d.DrainTimeout = positiveOr(d.DrainTimeout, 10*time.Second)
	// Zero takes the default; a negative timeout disables it.
	if d.IdleTimeout == 0 {
		d.IdleTimeout = 5 * time.Minute
	}
	if d.LineTimeout == 0 {
		d.LineTimeout = 30 * time.Second
	}
	return d
}

// positiveOr is v, or def when v is not positive.
func positiveOr[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// ErrServerClosed is returned by Serve after Shutdown or after its context
// ended.
var ErrServerClosed = errors.New("jsonrpc: server closed")

// Server serves JSON-RPC 2.0 over stream connections (Unix sockets, TCP,
// anything that is a net.Conn) and, through package jhttp, over HTTP.
//
// The flow of a request on a stream connection:
//
//	accept ──► admit: a slot of MaxConns, by peer class (owner peers — the
//	           │  server's own uid on a Unix socket — may also take the
//	           │  OwnerReserve); none left ──► ServerBusy, close
//	           ▼
//	conn ──► reader goroutine: ReadFrame (bounded size; idle deadline while
//	           │  nothing is buffered, LineTimeout once a message began)
//	           │  ──► decodeFrame (UTF-8 checked, at most MaxBatch elements)
//	           │  parse error / invalid request ──► error response
//	           │  acquire an in-flight slot (blocks the reader when full)
//	           ▼
//	       handler goroutine: Assign(method) ──► Handler.Handle(ctx, req)
//	           │  (panics recovered as InternalError)
//	           ▼
//	       writer (internal/outbox): responses appended to the pending buffer as
//	       they complete (out of order; the id matches them up), each
//	       replaced by ResponseTooLarge if it would take the unwritten
//	       bytes past MaxReplyBytes. While the reader still holds a whole
//	       frame it defers the write; before it waits for input it writes
//	       everything pending. Writes go out in 64 KiB pieces, each under
//	       its own WriteTimeout, then release the slots of the responses
//	       they carried.
//
// Slots are held until a response is written, so a peer that stops reading
// stalls only its own connection and costs at most MaxReplyBytes of
// memory before the write deadline disconnects it. docs/limits.md lists
// every limit with its default and flag.
type Server struct {
	assign Assigner
	opts   ServerOptions // defaults filled in
	log    *slog.Logger
	obs    Observer

	budget   *connbudget.Budget // MaxConns and OwnerReserve, all listeners
	euid     int
	closed   atomic.Bool
	mu       sync.Mutex
	lns      map[net.Listener]struct{}
	conns    map[*serverConn]struct{}
	connsWG  sync.WaitGroup
	shutdown chan struct{}
	workers  *workers.Pool
}

// NewServer returns a server that dispatches to a. opts may be nil.
func NewServer(a Assigner, opts *ServerOptions) *Server {
	o := opts.withDefaults()
	s := &Server{
		assign:   a,
		opts:     o,
		obs:      o.Observer,
		log:      o.Logger,
		euid:     os.Geteuid(),
		lns:      make(map[net.Listener]struct{}),
		conns:    make(map[*serverConn]struct{}),
		shutdown: make(chan struct{}),
		workers:  workers.New(),
	}
	b, fds, lowered := connbudget.New(o.MaxConns, o.OwnerReserve)
	if lowered {
		s.log.Warn("jsonrpc: connection limit lowered to fit the file descriptor limit", "max_conns", b.Limit(), "nofile", fds)
	}
	s.budget = b
	return s
}

// isOwner reports whether p is an owner peer: a Unix socket peer running
// as the server's own user.
func (s *Server) isOwner(p Peer) bool {
	return p.Transport == "unix" && p.HasCred && int(p.UID) == s.euid
}

func (s *Server) busyError() *Error {
	return Errorf(ServerBusy, "Server busy: too many connections (limit %d); retry later", s.budget.Limit())
}

// Serve accepts connections on l and serves each until it closes. It
// returns ErrServerClosed after Shutdown, or after ctx ends — in which case
// it first shuts the server down, draining in-flight calls for at most
// DrainTimeout. Serve closes l.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	if s.closed.Load() {
		_ = l.Close()
		return ErrServerClosed
	}
	s.mu.Lock()
	s.lns[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lns, l)
		s.mu.Unlock()
		_ = l.Close()
	}()
	stop := context.AfterFunc(ctx, func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.DrainTimeout)
		defer cancel()
		_ = s.Shutdown(dctx)
	})
	defer stop()
	var delay time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if s.closed.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, sysconn.EMFILE) {
				// Out of file descriptors or a transient failure: back off
				// instead of spinning.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("jsonrpc: accept failed; retrying", "err", err, "delay", delay)
				select {
				case <-time.After(delay):
					continue
				case <-s.shutdown:
					return ErrServerClosed
				}
			}
			return fmt.Errorf("jsonrpc: accept: %w", err)
		}
		delay = 0
		if !s.track() {
			_ = c.Close()
			return ErrServerClosed
		}
		go func() {
			defer s.connsWG.Done()
			s.serveConn(ctx, c)
		}()
	}
}

// ServeConn serves one established connection until it closes or the
// server shuts down, then closes it. A server used only through ServeConn
// should still be shut down when done, to release its worker goroutines.
func (s *Server) ServeConn(ctx context.Context, c net.Conn) {
	if !s.track() {
		_ = c.Close()
		return
	}
	defer s.connsWG.Done()
	s.serveConn(ctx, c)
}

// Shutdown stops accepting connections and reading requests, waits for the
// calls in flight to finish and their responses to be written, then closes
// every connection. If ctx ends first, the remaining calls' contexts are
// cancelled and the connections closed; Shutdown then returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.closed.Swap(true) {
		// Already shutting down: wait like the first caller.
		return s.waitConns(ctx)
	}
	close(s.shutdown)
	s.mu.Lock()
	for l := range s.lns {
		_ = l.Close()
	}
	for c := range s.conns {
		c.stopReading()
	}
	s.mu.Unlock()
	return s.waitConns(ctx)
}

// track counts a connection in connsWG unless the server is closed,
// under mu, which waitConns passes before it waits: no Add races the Wait.
func (s *Server) track() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	open := !s.closed.Load()
	if open {
		s.connsWG.Add(1)
	}
	return open
}

func (s *Server) waitConns(ctx context.Context) error {
	s.mu.Lock()
	//lint:ignore SA2001 the barrier track relies on
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.connsWG.Wait(); s.workers.Close(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			c.abort()
		}
		s.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

// serverConn is the state of one stream connection.
type serverConn struct {
	s      *Server
	nc     net.Conn
	ctx    context.Context
	cancel context.CancelFunc
	ireq   Request        // reused by inline calls (reader goroutine only)
	wg     sync.WaitGroup // handler goroutines
	frame  channel.Framing
	out    outbox.Outbox // replies, in-flight slots and their writes
	// stopping makes the reader return at its next read.
	stopping atomic.Bool
}

func (s *Server) serveConn(ctx context.Context, nc net.Conn) {
	peer := peerOf(nc)
	if !s.budget.Admit(s.isOwner(peer)) {
		s.refused(RefusedMaxConns)
		s.budget.Refuse(nc, s.opts.Framing.AppendFrame(nil, appendError(nil, nil, s.busyError())))
		return
	}
	defer s.budget.Release()
	s.observeConn(peer.Transport, 1)
	defer s.observeConn(peer.Transport, -1)
	if hs, ok := nc.(handshaker); ok {
		// A secure transport's handshake, bounded by its own timeout; a
		// failed one has already told the peer why (BTSP error frame).
		if err := hs.Handshake(ctx); err != nil {
			s.log.Debug("jsonrpc: transport handshake failed", "peer", peer.Addr, "err", err)
			_ = nc.Close()
			return
		}
		peer.Family = hs.PeerFamily()
	}

	c := &serverConn{s: s, nc: nc, frame: s.opts.Framing}
	c.out.Init(nc, s.opts.MaxInFlight, s.opts.WriteTimeout, func(err error) {
		s.log.Debug("jsonrpc: write failed; closing connection", "err", err)
		c.abort()
	})
	c.ctx, c.cancel = context.WithCancel(context.WithValue(context.WithValue(ctx, peerKey, &peer), notifierKey, Notifier(c)))
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		c.cancel()
		_ = nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()

	c.readLoop(peer)
	// No more requests: let the calls in flight finish and their responses
	// go out, then close.
	c.wg.Wait()
	c.out.GoIdle()
	c.cancel()
	_ = nc.Close()
}

// stopReading makes the reader return at its next read (used by Shutdown).
func (c *serverConn) stopReading() {
	c.stopping.Store(true)
	_ = c.nc.SetReadDeadline(time.Unix(1, 0))
}

// lingerClose ends a connection we refuse to read further (after an
// error reply), letting the reply reach the peer (connbudget.LingerClose).
func (c *serverConn) lingerClose() { connbudget.LingerClose(c.nc) }

// abort closes the connection and cancels the handlers' context.
func (c *serverConn) abort() {
	c.stopReading()
	// Close before cancelling: a handler that returns because its context
	// ended must not get its reply onto a connection being torn down.
	_ = c.nc.Close()
	c.cancel()
}

func (c *serverConn) readLoop(peer Peer) {
	// However the loop ends, the reader stops deferring writes: replies of
	// calls still running are written by their own goroutines.
	defer c.out.GoIdle()
	s := c.s
	max := s.opts.MaxMessageBytes
	clock := &lineClock{c: c, d: s.opts.LineTimeout}
	fr := c.frame.NewReader(clock, max)
	idle := s.opts.IdleTimeout
	gate := s.opts.ConnGate
	first := true
	for {
		if c.stopping.Load() {
			return
		}
		if !fr.Ready() {
			// About to wait for input (whatever partial input is
			// buffered): write what was queued meanwhile.
			c.out.GoIdle()
			switch {
			case clock.d > 0 && fr.Begun():
				// A frame has begun: it has LineTimeout to complete.
				clock.arm()
			case idle > 0:
				clock.armed = false
				c.setReadDeadline(time.Now().Add(idle))
			default:
				clock.armed = false
				c.setReadDeadline(time.Time{})
			}
		}
		line, err := fr.ReadFrame()
		if err == nil {
			c.out.Activate()
		}
		if err != nil {
			var tl *channel.FrameTooLargeError
			switch {
			case errors.As(err, &tl):
				// Let earlier calls answer first, so that this reply is the
				// last thing written before the half-close.
				s.refused(RefusedMessageTooLarge)
				c.out.FlushQueued()
				c.wg.Wait()
				c.send(Errorf(InvalidRequest, "Invalid Request: message exceeds the %d-byte limit; closing connection", tl.Limit))
				c.lingerClose()
				return
			case isTimeout(err) && !c.stopping.Load() && clock.armed:
				s.log.Debug("jsonrpc: closing connection with a stalled message", "peer", peer.Addr, "transport", peer.Transport)
				s.refused(RefusedLineTimeout)
				c.out.FlushQueued()
				c.wg.Wait()
				c.send(Errorf(InvalidRequest, "Invalid Request: message not completed within %s; closing connection", clock.d))
				c.lingerClose()
				return
			case isTimeout(err) && !c.stopping.Load():
				if c.out.InFlight() > 0 {
					continue // calls still in flight: not idle
				}
				s.log.Debug("jsonrpc: closing idle connection", "peer", peer.Addr, "transport", peer.Transport)
			case c.stopping.Load() || isClosedConn(err):
			default:
				s.log.Debug("jsonrpc: read failed", "peer", peer.Addr, "err", err)
			}
			return
		}
		if first {
			first = false
			if gate != nil {
				if e := gate(c.ctx, peer, line); e != nil {
					c.out.FlushQueued()
					c.send(e)
					c.lingerClose()
					return
				}
			}
		}
		c.dispatch(line)
	}
}

// lineClock is the connection as its frame reader sees it. While the
// connection is idle the read deadline is the idle timeout; the first
// non-blank byte that arrives starts a message, which must then complete
// within the line timeout (d).
type lineClock struct {
	c     *serverConn
	d     time.Duration
	armed bool // a message has begun; the deadline is its line deadline
}

func (l *lineClock) Read(p []byte) (int, error) {
	n, err := l.c.nc.Read(p)
	if n > 0 && !l.armed && !jsontext.IsBlank(p[:n]) {
		l.arm()
	}
	return n, err
}

// arm starts the line deadline of a message that has begun.
func (l *lineClock) arm() {
	if l.d <= 0 {
		return
	}
	l.armed = true
	l.c.setReadDeadline(time.Now().Add(l.d))
}

// setReadDeadline sets the read deadline without undoing stopReading.
func (c *serverConn) setReadDeadline(t time.Time) {
	_ = c.nc.SetReadDeadline(t)
	if c.stopping.Load() {
		_ = c.nc.SetReadDeadline(time.Unix(1, 0))
	}
}

// dispatch decodes one frame and runs or starts its handlers. Replies the
// reader produces itself (errors, inline handlers) are queued without a
// write; readLoop writes them in one go before it next blocks, which is
// what makes pipelined calls cheap.
func (c *serverConn) dispatch(line []byte) {
	// Decode in place: line is the reader's buffer, valid until the next
	// read. Whatever outlives this call is copied below.
	single, batch, isBatch, perr := decodeFrame(line, c.s.opts.MaxBatch)
	if perr != nil {
		c.queue(nil, perr, nil)
		return
	}
	if isBatch {
		// Rare path: decode a private copy so the elements can be handed
		// to goroutines.
		own := append([]byte(nil), line...)
		_, batch, _, _ = decodeFrame(own, 0)
		c.out.Acquire(c.ctx.Done())
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			budget := c.s.opts.MaxReplyBytes
			out, kept := c.s.runBatch(c.ctx, batch, budget, c.out.Held())
			c.out.Add(func(pending []byte) ([]byte, int64) {
				switch {
				case out == nil:
					return pending, kept
				case c.out.OverBudget(len(out)-int(kept), budget):
					return c.appendReply(pending, nil, c.s.replyTooLarge("a batch", len(out), budget), nil), kept
				}
				// Trade the results' count for the response's.
				return c.frame.AppendFrame(pending, out), kept
			}, 1, outbox.UnlessActive)
		}()
		return
	}
	if single.err != nil {
		c.queue(single.req.ID, single.err, nil)
		return
	}
	h := c.s.assign.Assign(c.ctx, single.req.Method)
	if h == nil {
		c.s.observeUnknown()
		if single.req.ID != nil {
			c.queue(single.req.ID, methodNotFound(single.req.Method), nil)
		}
		return
	}
	if _, ok := h.(inlineHandler); ok {
		// Inline handlers run before the next read, so the request can
		// point into the read buffer and its struct can be reused.
		c.ireq = single.req
		result, e := c.s.run(c.ctx, h, &c.ireq)
		if c.ireq.ID != nil {
			c.queue(c.ireq.ID, e, result)
		}
		c.ireq = Request{}
		return
	}
	req := detach(&single.req)
	c.out.Acquire(c.ctx.Done())
	c.wg.Add(1)
	c.s.workers.Submit(func() {
		defer c.wg.Done()
		result, e := c.s.run(c.ctx, h, req)
		if req.ID == nil {
			result, e = nil, nil // a notification: nothing to send
		}
		c.out.Add(func(pending []byte) ([]byte, int64) {
			return c.appendReply(pending, req.ID, e, result), 0
		}, 1, outbox.UnlessActive)
	})
}

// detach returns a copy of r whose id and params no longer share the read
// buffer (one allocation for both).
func detach(r *Request) *Request {
	d := &Request{Method: r.Method}
	if n := len(r.ID) + len(r.Params); n > 0 {
		buf := make([]byte, 0, n)
		buf = append(buf, r.ID...)
		buf = append(buf, r.Params...)
		if r.ID != nil {
			d.ID = buf[:len(r.ID):len(r.ID)]
		}
		if r.Params != nil {
			d.Params = buf[len(r.ID):]
		}
	}
	return d
}

// queue appends a reply produced on the reader goroutine, holding a slot
// until it is written, without writing it yet.
func (c *serverConn) queue(id []byte, e *Error, result []byte) {
	c.out.Acquire(c.ctx.Done())
	c.out.Add(func(pending []byte) ([]byte, int64) {
		return c.appendReply(pending, id, e, result), 0
	}, 1, outbox.Later)
}

// send queues a reply and writes it at once (used for the last words on a
// connection: oversize frames, a refused first message).
func (c *serverConn) send(e *Error) {
	c.out.Add(func(pending []byte) ([]byte, int64) {
		return c.appendReply(pending, nil, e, nil), 0
	}, 0, outbox.Now)
}

// replyOverhead is a generous bound on the bytes a response adds to its
// result and id.
const replyOverhead = 64

// replyTooLarge is the error that replaces a reply over the budget.
func (s *Server) replyTooLarge(what string, n, budget int) *Error {
	s.refused(RefusedReplyTooLarge)
	return Errorf(ResponseTooLarge, "Response too large: the reply to %s (%d bytes) exceeds the connection's reply budget of %d bytes", what, n, budget)
}

// appendReply frames one reply (id with either e or result) onto pending.
// A result that would exceed the reply budget is replaced by
// ResponseTooLarge. Called by the outbox with its lock held.
func (c *serverConn) appendReply(pending, id []byte, e *Error, result []byte) []byte {
	if e == nil && result == nil {
		return pending
	}
	if n, budget := len(result)+len(id)+replyOverhead, c.s.opts.MaxReplyBytes; e == nil && c.out.OverBudget(n, budget) {
		e, result = c.s.replyTooLarge("this call", n, budget), nil
	}
	if channel.IsNewline(c.frame) {
		// Build the message in place: no intermediate buffer.
		if e != nil {
			pending = appendError(pending, id, e)
		} else {
			pending = appendResult(pending, id, result)
		}
		return append(pending, '\n')
	}
	var msg []byte
	if e != nil {
		msg = appendError(nil, id, e)
	} else {
		msg = appendResult(nil, id, result)
	}
	return c.frame.AppendFrame(pending, msg)
}

// Notify sends a server-initiated notification on this connection. It
// fails if the connection is closed or if the peer is so far behind that
// more than MaxMessageBytes of output is already waiting (the slow-consumer
// policy: the connection is then closed).
func (c *serverConn) Notify(ctx context.Context, method string, params any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := marshalParams(params)
	if err != nil {
		return err
	}
	msg := appendRequest(nil, method, p, nil)
	failed, slow := c.out.Post(func(pending []byte) []byte { return c.frame.AppendFrame(pending, msg) }, c.s.opts.MaxMessageBytes, errSlowConsumer)
	switch {
	case failed != nil:
		return fmt.Errorf("jsonrpc: notify: connection failed: %w", failed)
	case slow:
		c.abort()
		return errSlowConsumer
	}
	return nil
}

var errSlowConsumer = errors.New("jsonrpc: slow consumer: peer is not reading; connection closed")

// call runs one well-formed request through the assigner and handler and
// returns the encoded result or the error to send.
func (s *Server) call(ctx context.Context, req *Request) (result []byte, e *Error) {
	h := s.assign.Assign(ctx, req.Method)
	if h == nil {
		s.observeUnknown()
		return nil, methodNotFound(req.Method)
	}
	return s.run(ctx, h, req)
}

func methodNotFound(method string) *Error {
	return Errorf(MethodNotFound, "Method not found: %q", method)
}

// run calls h (see runHandler), telling the Observer when one is set.
func (s *Server) run(ctx context.Context, h Handler, req *Request) (result []byte, e *Error) {
	if s.obs != nil {
		return s.runObserved(ctx, h, req)
	}
	return s.runHandler(ctx, h, req)
}

// runObserved is run with the Observer told of the call.
func (s *Server) runObserved(ctx context.Context, h Handler, req *Request) (result []byte, e *Error) {
	method := req.Method // req may be reused once the handler returns
	s.obs.OnInFlight(1)
	start := time.Now()
	result, e = s.runHandler(ctx, h, req)
	var code Code
	if e != nil {
		code = e.Code
	}
	s.obs.OnRequest(method, code, time.Since(start))
	s.obs.OnInFlight(-1)
	return result, e
}

// runHandler calls h, recovering a panic as InternalError, and encodes its
// result.
func (s *Server) runHandler(ctx context.Context, h Handler, req *Request) (result []byte, e *Error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("jsonrpc: handler panicked", "method", req.Method, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			result, e = nil, Errorf(InternalError, "Internal error: the handler of %q failed", req.Method)
		}
	}()
	v, err := h.Handle(ctx, req)
	if err != nil {
		return nil, asError(err)
	}
	b, err := encodeResult(v)
	if err != nil {
		s.log.Error("jsonrpc: cannot encode result", "method", req.Method, "err", err)
		return nil, Errorf(InternalError, "Internal error: cannot encode the result of %q", req.Method)
	}
	return b, nil
}

// runBatch answers the elements of a batch concurrently and returns the
// batch response, or nil when every element was a notification. The bytes
// of the results kept are counted in held, which the batches of one
// connection share; an element whose result would take held past budget
// is answered ResponseTooLarge instead. The caller subtracts the returned
// count from held once the response is queued or dropped.
func (s *Server) runBatch(ctx context.Context, batch []inbound, budget int, held *atomic.Int64) (out []byte, kept int64) {
	type reply struct {
		id     []byte
		e      *Error
		result []byte
		skip   bool
	}
	replies := make([]reply, len(batch))
	var mine atomic.Int64
	take := func(n int64) bool {
		if held.Add(n) > int64(budget) {
			held.Add(-n)
			return false
		}
		mine.Add(n)
		return true
	}
	// The envelopes, brackets and commas are always sent.
	envelopes := int64(2 + len(batch)*replyOverhead)
	held.Add(envelopes)
	mine.Add(envelopes)
	var wg sync.WaitGroup
	limit := make(chan struct{}, s.opts.MaxInFlight)
	for i := range batch {
		in := &batch[i]
		if in.err != nil {
			replies[i] = reply{id: in.req.ID, e: in.err}
			continue
		}
		wg.Add(1)
		limit <- struct{}{}
		go func() {
			defer func() { <-limit; wg.Done() }()
			result, e := s.call(ctx, &in.req)
			if in.req.ID == nil {
				replies[i] = reply{skip: true}
				return
			}
			if e == nil && !take(int64(len(result)+len(in.req.ID))) {
				e, result = s.replyTooLarge(fmt.Sprintf("batch element %d", i), len(result), budget), nil
			}
			replies[i] = reply{id: in.req.ID, e: e, result: result, skip: in.req.ID == nil}
		}()
	}
	wg.Wait()
	for _, r := range replies {
		if r.skip {
			continue
		}
		if out == nil {
			out = append(out, '[')
		} else {
			out = append(out, ',')
		}
		if r.e != nil {
			out = appendError(out, r.id, r.e)
		} else {
			out = appendResult(out, r.id, r.result)
		}
	}
	if out == nil {
		return nil, mine.Load()
	}
	return append(out, ']'), mine.Load()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isClosedConn(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, io.EOF)
}
