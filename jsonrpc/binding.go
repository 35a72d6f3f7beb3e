package jsonrpc

import (
	"context"
	"encoding/json"
	"net"
	"sync"
	"sync/atomic"

	"github.com/capmesh/capmesh/jsonrpc/internal/jsontext"
)

// This file is what a binding outside the package builds on: a transport
// that carries one message per exchange (package jhttp, the HTTP binding)
// answers with Answer, holds the server's connection budget with Listener,
// and reads the server's limits with Options; its client side encodes with
// EncodeRequest and decodes with ParseResponse.

// Options returns the server's options, every default filled in.
func (s *Server) Options() ServerOptions { return s.opts }

// Answer answers one whole message (a request or a batch) synchronously,
// with the dispatcher and limits of the stream transports, and returns
// the response, or nil when there is nothing to answer (a notification, a
// batch of them). The peer is the one ctx carries (ContextWithPeer). An
// empty message is answered InvalidRequest. The caller bounds the size of
// msg (MaxMessageBytes).
func (s *Server) Answer(ctx context.Context, msg []byte) []byte {
	if jsontext.IsBlank(msg) {
		return appendError(nil, nil, Errorf(InvalidRequest, "Invalid Request: empty body"))
	}
	single, batch, isBatch, perr := decodeFrame(msg, s.opts.MaxBatch)
	switch {
	case perr != nil:
		return appendError(nil, nil, perr)
	case isBatch:
		out, _ := s.runBatch(ctx, batch, s.opts.MaxReplyBytes, new(atomic.Int64))
		return out
	case single.err != nil:
		return appendError(nil, single.req.ID, single.err)
	}
	result, e := s.call(ctx, &single.req)
	if single.req.ID == nil {
		return nil
	}
	if n, budget := len(result)+len(single.req.ID)+replyOverhead, s.opts.MaxReplyBytes; e == nil && n > budget {
		e = s.replyTooLarge("this call", n, budget)
	}
	if e != nil {
		return appendError(nil, single.req.ID, e)
	}
	return appendResult(nil, single.req.ID, result)
}

// Listener wraps l so that each connection it accepts holds one of the
// server's connection slots (MaxConns, shared with Serve's listeners), as
// a non-owner peer of transport, until it is closed. A connection over
// the budget is sent refusal(the ServerBusy error) and closed, without
// being returned.
func (s *Server) Listener(l net.Listener, transport string, refusal func(*Error) []byte) net.Listener {
	return &slotListener{Listener: l, s: s, transport: transport, refusal: refusal}
}

type slotListener struct {
	net.Listener
	s         *Server
	transport string
	refusal   func(*Error) []byte
}

func (l *slotListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.s.budget.Admit(false) {
			l.s.observeConn(l.transport, 1)
			return &slotConn{Conn: c, s: l.s, transport: l.transport}, nil
		}
		l.s.refused(RefusedMaxConns)
		go l.s.budget.Refuse(c, l.refusal(l.s.busyError()))
	}
}

// slotConn releases its connection slot when closed.
type slotConn struct {
	net.Conn
	s         *Server
	transport string
	once      sync.Once
}

func (c *slotConn) Close() error {
	c.once.Do(func() {
		c.s.budget.Release()
		c.s.observeConn(c.transport, -1)
	})
	return c.Conn.Close()
}

// EncodeError returns the error response to id (nil for id null), as the
// server writes it.
func EncodeError(id json.RawMessage, e *Error) []byte { return appendError(nil, id, e) }

// EncodeRequest returns a request for method with id, or a notification
// when id is nil. params is nil for none, a json.RawMessage used as is, or
// a value that encodes to a JSON object or array.
func EncodeRequest(method string, params any, id json.RawMessage) ([]byte, error) {
	p, err := marshalParams(params)
	if err != nil {
		return nil, err
	}
	return appendRequest(nil, method, p, id), nil
}

// Response is one response message as a client receives it: its id and
// either a result or an error.
type Response struct {
	ID     json.RawMessage
	Result json.RawMessage
	Error  *Error
}

// ParseResponse decodes msg, which must be one response object with a
// result or an error (UTF-8, nothing after it).
func ParseResponse(msg []byte) (*Response, error) {
	r, err := decodeResponse(msg)
	if err != nil {
		return nil, err
	}
	return &Response{ID: r.id, Result: r.result, Error: r.err}, nil
}

// UnmarshalResult decodes the result into v as Client.Call does: a nil v
// ignores it, a *json.RawMessage receives a copy of its bytes.
func (r *Response) UnmarshalResult(v any) error { return decodeResult(r.Result, v) }
