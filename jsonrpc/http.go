package jsonrpc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// HTTPHandler returns the HTTP bridge: an http.Handler that accepts one
// JSON-RPC message (a request or a batch) per POST body, with the same
// dispatcher and limits as the stream transports.
//
//   - Methods other than POST get 405 Method Not Allowed (with Allow: POST).
//   - A Content-Type other than application/json gets 415.
//   - A body over MaxMessageBytes gets 413 with an InvalidRequest body.
//   - Otherwise the status is 200 with the JSON-RPC response as the body,
//     whatever the call's outcome (errors included), or 204 No Content when
//     there is nothing to answer (a notification, or a batch of them).
//
// It serves every path it is mounted on; capmesh mounts it at /jsonrpc.
func (s *Server) HTTPHandler() http.Handler {
	return http.HandlerFunc(s.serveHTTP)
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "JSON-RPC requires POST", http.StatusMethodNotAllowed)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(w, "JSON-RPC requires Content-Type: application/json", http.StatusUnsupportedMediaType)
		return
	}
	max := s.opts.MaxMessageBytes
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(max)+1))
	if err != nil {
		http.Error(w, "reading request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > max {
		s.refused(RefusedMessageTooLarge)
		s.writeJSON(w, http.StatusRequestEntityTooLarge, appendError(nil, nil, Errorf(InvalidRequest, "Invalid Request: message exceeds the %d-byte limit", max)))
		return
	}
	peer := Peer{Transport: "http", Addr: r.RemoteAddr}
	ctx := context.WithValue(r.Context(), peerKey, &peer)
	out := s.processFrame(ctx, body)
	if out == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.writeJSON(w, http.StatusOK, out)
}

// writeJSON writes the response as the stream transports do: in pieces of
// at most 64 KiB, each under its own WriteTimeout, so that an HTTP peer
// that does not read its response is disconnected instead of holding it.
func (s *Server) writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	for len(body) > 0 {
		n := min(len(body), writeChunk)
		_ = rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
		if _, err := w.Write(body[:n]); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		body = body[n:]
	}
}

// processFrame answers one whole frame synchronously and returns the
// response bytes, or nil when nothing is to be sent.
func (s *Server) processFrame(ctx context.Context, frame []byte) []byte {
	if isBlank(frame) {
		return appendError(nil, nil, Errorf(InvalidRequest, "Invalid Request: empty body"))
	}
	single, batch, isBatch, perr := decodeFrame(frame, s.opts.MaxBatch)
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

// HTTPClient calls a JSON-RPC server through its HTTP bridge. It is safe for
// concurrent use.
type HTTPClient struct {
	url    string
	hc     *http.Client
	nextID atomic.Uint64
}

// NewHTTPClient returns a client that POSTs to url. hc may be nil for
// http.DefaultClient.
func NewHTTPClient(url string, hc *http.Client) *HTTPClient {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &HTTPClient{url: url, hc: hc}
}

// Call implements Caller.
func (c *HTTPClient) Call(ctx context.Context, method string, params, result any) error {
	p, err := marshalParams(params)
	if err != nil {
		return err
	}
	id := strconv.AppendUint(nil, c.nextID.Add(1), 10)
	body, status, err := c.post(ctx, appendRequest(nil, method, p, id))
	if err != nil {
		return err
	}
	if status != http.StatusOK && status != http.StatusRequestEntityTooLarge {
		return fmt.Errorf("jsonrpc: %s: HTTP %d: %s", c.url, status, bytes.TrimSpace(body))
	}
	r, err := decodeResponse(body)
	if err != nil {
		return fmt.Errorf("jsonrpc: %s: malformed response: %w", c.url, err)
	}
	if r.err != nil {
		return r.err
	}
	if !bytes.Equal(r.id, id) {
		return fmt.Errorf("jsonrpc: %s: response id %s does not match request id %s", c.url, r.id, id)
	}
	return decodeResult(r.result, result)
}

// Notify implements Caller.
func (c *HTTPClient) Notify(ctx context.Context, method string, params any) error {
	p, err := marshalParams(params)
	if err != nil {
		return err
	}
	body, status, err := c.post(ctx, appendRequest(nil, method, p, nil))
	if err != nil {
		return err
	}
	if status != http.StatusNoContent && status != http.StatusOK {
		return fmt.Errorf("jsonrpc: %s: HTTP %d: %s", c.url, status, bytes.TrimSpace(body))
	}
	return nil
}

// Post sends one raw frame and returns the raw response body and status.
func (c *HTTPClient) Post(ctx context.Context, frame []byte) ([]byte, int, error) {
	return c.post(ctx, frame)
}

func (c *HTTPClient) post(ctx context.Context, msg []byte) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(msg))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, resp.StatusCode, err
	}
	return body, resp.StatusCode, nil
}

// Close implements Caller; it releases idle connections.
func (c *HTTPClient) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}

// HTTPServer returns an http.Server for h hardened with the server's
// limits: headers must arrive within HeaderTimeout and a whole request
// within HeaderTimeout+LineTimeout, idle keep-alive connections are closed
// after IdleTimeout or 2 minutes, whichever is shorter, and headers are
// bounded to 64 KiB. Serve it on HTTPListener(l) so that its connections
// count against MaxConns. Responses have no overall deadline, so long
// polls keep working; the JSON-RPC bridge bounds its own writes per
// 64 KiB (WriteTimeout).
func (s *Server) HTTPServer(h http.Handler) *http.Server {
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: s.opts.HeaderTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	if d := s.opts.LineTimeout; d > 0 {
		hs.ReadTimeout = hs.ReadHeaderTimeout + d
	}
	hs.IdleTimeout = httpIdle
	if d := s.opts.IdleTimeout; d > 0 {
		hs.IdleTimeout = min(d, httpIdle)
	}
	return hs
}

// maxHeaderBytes bounds the headers of an HTTP request.
const maxHeaderBytes = 64 << 10

// httpIdle bounds how long an idle keep-alive HTTP connection keeps its
// slot (IdleTimeout, when shorter, wins).
const httpIdle = 2 * time.Minute

// HTTPListener wraps l so that each HTTP connection it accepts holds one
// of the server's connection slots, as a non-owner peer, until it is
// closed. A connection over the budget is answered 503 with a ServerBusy
// body and closed, without reaching the http.Server.
func (s *Server) HTTPListener(l net.Listener) net.Listener {
	return &httpListener{Listener: l, s: s}
}

type httpListener struct {
	net.Listener
	s *Server
}

func (l *httpListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.s.admit(false) {
			l.s.observeConn("http", 1)
			return &slotConn{Conn: c, s: l.s}, nil
		}
		l.s.refused(RefusedMaxConns)
		go l.s.refuse(c, busyHTTP(l.s.busyError()))
	}
}

// busyHTTP is the 503 response that refuses a connection over the budget.
func busyHTTP(e *Error) []byte {
	body := appendError(nil, nil, e)
	msg := fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n", len(body))
	return append(msg, body...)
}

// slotConn releases its connection slot when closed.
type slotConn struct {
	net.Conn
	s    *Server
	once sync.Once
}

func (c *slotConn) Close() error {
	c.once.Do(func() {
		c.s.nconns.Add(-1)
		c.s.observeConn("http", -1)
	})
	return c.Conn.Close()
}
