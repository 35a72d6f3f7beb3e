package jsonrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capmesh/capmesh/jsonrpc/channel"
	"github.com/capmesh/capmesh/jsonrpc/internal/jsontext"
)

// Caller is what every capmesh client offers, whatever the transport: the
// stream Client and jhttp.Client (the HTTP binding) both implement it.
type Caller interface {
	// Call sends a request and decodes its result into result (which may be
	// nil to discard it, or a *json.RawMessage to keep the bytes). When the
	// server answers with an error, Call returns it as an *Error.
	Call(ctx context.Context, method string, params, result any) error
	// Notify sends a notification, which gets no reply.
	Notify(ctx context.Context, method string, params any) error
	// Close releases the connection.
	Close() error
}

// ClientOptions configure a Client. A nil *ClientOptions means defaults.
type ClientOptions struct {
	// Framing of the connection. Default channel.Newline.
	Framing channel.Framing
	// MaxMessageBytes bounds one incoming frame. Default 64 MiB.
	MaxMessageBytes int
	// OnNotify, when set, receives the notifications the server sends on
	// this connection, in order, on the client's reader goroutine: it must
	// not block for long.
	OnNotify func(method string, params json.RawMessage)
	// Logger receives protocol anomalies (responses to unknown ids).
	Logger *slog.Logger
}

// ErrClientClosed is returned by calls made after Close.
var ErrClientClosed = errors.New("jsonrpc: client closed")

// Client is a JSON-RPC 2.0 client over one stream connection. It is safe
// for concurrent use: calls from many goroutines are pipelined on the
// connection and their responses matched by id, in whatever order the
// server sends them.
type Client struct {
	nc       net.Conn
	frame    channel.Framing
	log      *slog.Logger
	onNotify func(string, json.RawMessage)

	nextID atomic.Uint64

	mu      sync.Mutex
	pending map[uint64]chan response
	err     error // set once the connection is gone
	done    chan struct{}

	wmu     sync.Mutex
	wbuf    []byte
	writing bool
	werr    error
	spare   []byte
}

// NewClient starts a client on c. The client owns c and closes it on Close.
func NewClient(c net.Conn, opts *ClientOptions) *Client {
	cl := &Client{
		nc:      c,
		frame:   channel.Newline,
		log:     slog.Default(),
		pending: make(map[uint64]chan response),
		done:    make(chan struct{}),
	}
	max := 64 << 20
	if opts != nil {
		if opts.Framing != nil {
			cl.frame = opts.Framing
		}
		if opts.MaxMessageBytes > 0 {
			max = opts.MaxMessageBytes
		}
		if opts.Logger != nil {
			cl.log = opts.Logger
		}
		cl.onNotify = opts.OnNotify
	}
	go cl.readLoop(cl.frame.NewReader(c, max))
	return cl
}

// Call implements Caller.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	p, err := marshalParams(params)
	if err != nil {
		return err
	}
	id := c.nextID.Add(1)
	ch := make(chan response, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.pending[id] = ch
	c.mu.Unlock()

	var idbuf [20]byte
	if err := c.write(appendRequest(nil, method, p, strconv.AppendUint(idbuf[:0], id, 10))); err != nil {
		c.forget(id)
		return err
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return r.err
		}
		return decodeResult(r.result, result)
	case <-ctx.Done():
		c.forget(id)
		return fmt.Errorf("jsonrpc: call %s: %w", method, ctx.Err())
	case <-c.done:
		// The reader may have delivered just before failing.
		select {
		case r := <-ch:
			if r.err != nil {
				return r.err
			}
			return decodeResult(r.result, result)
		default:
		}
		c.mu.Lock()
		err := c.err
		c.mu.Unlock()
		return err
	}
}

func decodeResult(raw json.RawMessage, result any) error {
	switch r := result.(type) {
	case nil:
		return nil
	case *json.RawMessage:
		*r = append((*r)[:0], raw...)
		return nil
	}
	if err := json.Unmarshal(raw, result); err != nil {
		return fmt.Errorf("jsonrpc: decoding result: %w", err)
	}
	return nil
}

// Notify implements Caller.
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := marshalParams(params)
	if err != nil {
		return err
	}
	c.mu.Lock()
	err = c.err
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.write(appendRequest(nil, method, p, nil))
}

// BatchCall is one element of a batch sent with Client.Batch.
type BatchCall struct {
	Method string
	Params any
	// Notification makes this element a notification (no reply).
	Notification bool
	// Result receives the decoded result (optional).
	Result any
	// Err is set after Batch returns when the server answered this element
	// with an error.
	Err error
}

// Batch sends calls as one JSON-RPC batch and waits for every reply. It
// returns an error only when the batch as a whole failed; per-element errors
// are in each element's Err.
func (c *Client) Batch(ctx context.Context, calls []BatchCall) error {
	if len(calls) == 0 {
		return errors.New("jsonrpc: empty batch")
	}
	type slot struct {
		i  int
		id uint64
		ch chan response
	}
	var slots []slot
	msg := []byte{'['}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	var encErr error
	for i := range calls {
		p, err := marshalParams(calls[i].Params)
		if err != nil {
			encErr = err
			break
		}
		if i > 0 {
			msg = append(msg, ',')
		}
		if calls[i].Notification {
			msg = appendRequest(msg, calls[i].Method, p, nil)
			continue
		}
		id := c.nextID.Add(1)
		ch := make(chan response, 1)
		c.pending[id] = ch
		slots = append(slots, slot{i, id, ch})
		msg = appendRequest(msg, calls[i].Method, p, strconv.AppendUint(nil, id, 10))
	}
	c.mu.Unlock()
	forgetAll := func() {
		for _, s := range slots {
			c.forget(s.id)
		}
	}
	if encErr != nil {
		forgetAll()
		return encErr
	}
	if err := c.write(append(msg, ']')); err != nil {
		forgetAll()
		return err
	}
	for _, s := range slots {
		select {
		case r := <-s.ch:
			if r.err != nil {
				calls[s.i].Err = r.err
			} else if err := decodeResult(r.result, calls[s.i].Result); err != nil {
				calls[s.i].Err = err
			}
		case <-ctx.Done():
			forgetAll()
			return fmt.Errorf("jsonrpc: batch: %w", ctx.Err())
		case <-c.done:
			select {
			case r := <-s.ch:
				calls[s.i].Err = r.err
				if r.err == nil {
					calls[s.i].Err = decodeResult(r.result, calls[s.i].Result)
				}
				continue
			default:
			}
			forgetAll()
			c.mu.Lock()
			err := c.err
			c.mu.Unlock()
			return err
		}
	}
	return nil
}

// Close closes the connection. Calls still waiting fail with
// ErrClientClosed.
func (c *Client) Close() error {
	c.fail(ErrClientClosed)
	err := c.nc.Close()
	<-c.done
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Done is closed when the connection is gone.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the client stopped, or nil while it runs.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *Client) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// write queues one framed message and writes whatever is queued unless
// another goroutine is already writing; concurrent callers thus share
// system calls.
func (c *Client) write(msg []byte) error {
	c.wmu.Lock()
	if c.werr != nil {
		err := c.werr
		c.wmu.Unlock()
		return err
	}
	c.wbuf = c.frame.AppendFrame(c.wbuf, msg)
	if c.writing {
		c.wmu.Unlock()
		return nil
	}
	c.writing = true
	var err error
	for len(c.wbuf) > 0 && err == nil {
		buf := c.wbuf
		c.wbuf = c.spare[:0]
		c.wmu.Unlock()
		_, err = c.nc.Write(buf)
		c.wmu.Lock()
		if cap(buf) <= 1<<20 {
			c.spare = buf[:0]
		}
	}
	if err != nil {
		c.werr = fmt.Errorf("jsonrpc: write: %w", err)
		c.wbuf = nil
		err = c.werr
	}
	c.writing = false
	c.wmu.Unlock()
	if err != nil {
		c.fail(err)
		_ = c.nc.Close()
	}
	return err
}

// fail records why the connection is gone and fails every pending call.
func (c *Client) fail(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	if n := len(c.pending); n > 0 && !errors.Is(cause, ErrClientClosed) {
		c.err = &ConnectionLostError{Pending: n, Err: cause}
	} else if errors.Is(cause, ErrClientClosed) {
		c.err = ErrClientClosed
	} else {
		c.err = &ConnectionLostError{Err: cause}
	}
	c.pending = map[uint64]chan response{}
}

// ConnectionLostError reports that the connection ended; Pending counts the
// calls that were waiting for a reply at that moment.
type ConnectionLostError struct {
	Pending int
	Err     error
}

// Error says the connection was lost and why.
func (e *ConnectionLostError) Error() string {
	if e.Pending > 0 {
		return fmt.Sprintf("jsonrpc: connection lost with %d call(s) pending: %v", e.Pending, e.Err)
	}
	return fmt.Sprintf("jsonrpc: connection lost: %v", e.Err)
}

// Unwrap returns the error that ended the connection.
func (e *ConnectionLostError) Unwrap() error { return e.Err }

func (c *Client) readLoop(fr channel.FrameReader) {
	defer close(c.done)
	for {
		line, err := fr.ReadFrame()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				err = io.EOF
			}
			c.fail(err)
			return
		}
		c.deliver(line)
	}
}

// deliver routes one incoming frame — a response, a batch of responses or
// a notification — validating and decoding it in one pass.
func (c *Client) deliver(line []byte) {
	i := jsontext.SkipSpace(line, 0)
	if i >= len(line) {
		return
	}
	switch line[i] {
	case '{':
		m, end, err := decodeClientMsg(line, i)
		if err == nil {
			if j := jsontext.SkipSpace(line, end); j != len(line) {
				err = &jsontext.SyntaxError{Msg: "invalid character after top-level value", Offset: j}
			}
		}
		if err != nil {
			c.log.Warn("jsonrpc: client received invalid JSON", "err", err)
			return
		}
		c.deliverOne(&m)
	case '[':
		// Validate the whole batch before acting on any element.
		end, err := jsontext.ScanValue(line, i, 0)
		if err != nil {
			c.log.Warn("jsonrpc: client received invalid JSON", "err", err)
			return
		}
		j := jsontext.SkipSpace(line, i+1)
		for j < end && line[j] != ']' {
			var e int
			if line[j] == '{' {
				var m clientMsg
				m, e, _ = decodeClientMsg(line, j)
				c.deliverOne(&m)
			} else {
				e, _ = jsontext.ScanValue(line, j, 1)
			}
			j = jsontext.SkipSpace(line, e)
			if line[j] == ',' {
				j = jsontext.SkipSpace(line, j+1)
			}
		}
	default:
		c.log.Debug("jsonrpc: client ignored a message that is neither object nor array")
	}
}

func (c *Client) deliverOne(m *clientMsg) {
	if m.hasMethod && m.id == nil {
		if c.onNotify != nil {
			c.onNotify(m.method, append(json.RawMessage(nil), m.params...))
		}
		return
	}
	if m.errDecoded != nil || (!m.hasResult && m.err == nil) {
		c.log.Debug("jsonrpc: client ignored a message", "err", m.errDecoded)
		return
	}
	id, err := strconv.ParseUint(string(m.id), 10, 64)
	if err != nil {
		if m.err != nil && string(m.id) == "null" {
			// An error the server could not tie to a request (parse error,
			// over-long line, handshake required): nothing waits for it by
			// id, so fail the connection with it.
			c.fail(m.err)
			return
		}
		c.log.Debug("jsonrpc: response with unknown id", "id", string(m.id))
		return
	}
	r := m.response
	if r.result != nil {
		r.result = append(json.RawMessage(nil), r.result...)
	}
	c.mu.Lock()
	ch, ok := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ok {
		ch <- r
	}
}

// Dial connects to network/address ("unix" or "tcp") and returns a client.
// Most callers use endpoint.Dial, which also understands capmesh addresses.
func Dial(ctx context.Context, network, address string, opts *ClientOptions) (*Client, error) {
	var d net.Dialer
	if _, ok := ctx.Deadline(); !ok {
		d.Timeout = 5 * time.Second
	}
	nc, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return NewClient(nc, opts), nil
}
