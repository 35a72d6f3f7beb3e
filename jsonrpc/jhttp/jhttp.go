// Package jhttp is the HTTP binding of package jsonrpc: a bridge that
// serves a jsonrpc.Server's methods to one JSON-RPC message per POST body,
// the hardened http.Server and connection-budget listener that bridge is
// served with, and a Client that calls through it.
//
//	mux.Handle("/jsonrpc", jhttp.Handler(srv))
//	hs := jhttp.NewServer(srv, mux)        // the server's timeouts
//	err := hs.Serve(jhttp.Listener(srv, l)) // the server's MaxConns
//
//	c := jhttp.NewClient("http://host/jsonrpc", nil)
//	err = c.Call(ctx, "health.liveness", nil, &out)
//
// The bridge runs each message through Server.Answer, so the dispatcher,
// limits and error codes are those of the stream transports; HTTP only
// adds its statuses (405, 415, 413, 204, and 503 for a connection over
// the budget).
package jhttp

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
	"sync/atomic"
	"time"

	"github.com/capmesh/capmesh/jsonrpc"
)

// Handler returns the HTTP bridge of s: an http.Handler that accepts one
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
func Handler(s *jsonrpc.Server) http.Handler {
	return &bridge{s: s, opts: s.Options()}
}

type bridge struct {
	s    *jsonrpc.Server
	opts jsonrpc.ServerOptions
}

func (b *bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "JSON-RPC requires POST", http.StatusMethodNotAllowed)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(w, "JSON-RPC requires Content-Type: application/json", http.StatusUnsupportedMediaType)
		return
	}
	max := b.opts.MaxMessageBytes
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(max)+1))
	if err != nil {
		http.Error(w, "reading request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > max {
		if b.opts.Observer != nil {
			b.opts.Observer.OnRefused(jsonrpc.RefusedMessageTooLarge)
		}
		b.writeJSON(w, http.StatusRequestEntityTooLarge, jsonrpc.EncodeError(nil, jsonrpc.Errorf(jsonrpc.InvalidRequest, "Invalid Request: message exceeds the %d-byte limit", max)))
		return
	}
	ctx := jsonrpc.ContextWithPeer(r.Context(), jsonrpc.Peer{Transport: "http", Addr: r.RemoteAddr})
	out := b.s.Answer(ctx, body)
	if out == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	b.writeJSON(w, http.StatusOK, out)
}

// writeChunk is the most one write of a response carries, as on streams.
const writeChunk = 64 << 10

// writeJSON writes the response as the stream transports do: in pieces of
// at most 64 KiB, each under its own WriteTimeout, so that an HTTP peer
// that does not read its response is disconnected instead of holding it.
func (b *bridge) writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	for len(body) > 0 {
		n := min(len(body), writeChunk)
		_ = rc.SetWriteDeadline(time.Now().Add(b.opts.WriteTimeout))
		if _, err := w.Write(body[:n]); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		body = body[n:]
	}
}

// Client calls a JSON-RPC server through its HTTP bridge. It is safe for
// concurrent use.
type Client struct {
	url    string
	hc     *http.Client
	nextID atomic.Uint64
}

var _ jsonrpc.Caller = (*Client)(nil)

// DefaultHTTPClient is the http.Client of a Client made without one:
// http.DefaultClient's transport, but a redirect is never followed — the
// call fails with the redirect's status (NoRedirect).
var DefaultHTTPClient = &http.Client{CheckRedirect: NoRedirect}

// NoRedirect is an http.Client CheckRedirect that follows no redirect: a
// JSON-RPC call is posted to the endpoint it was addressed to and nowhere
// else (a server's redirect could name a service that only the caller's
// machine reaches).
func NoRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// NewClient returns a client that POSTs to url. hc may be nil for
// DefaultHTTPClient.
func NewClient(url string, hc *http.Client) *Client {
	if hc == nil {
		hc = DefaultHTTPClient
	}
	return &Client{url: url, hc: hc}
}

// Call implements jsonrpc.Caller.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	id := strconv.AppendUint(nil, c.nextID.Add(1), 10)
	msg, err := jsonrpc.EncodeRequest(method, params, id)
	if err != nil {
		return err
	}
	body, status, err := c.post(ctx, msg)
	if err != nil {
		return err
	}
	if status != http.StatusOK && status != http.StatusRequestEntityTooLarge {
		return fmt.Errorf("jsonrpc: %s: HTTP %d: %s", c.url, status, bytes.TrimSpace(body))
	}
	r, err := jsonrpc.ParseResponse(body)
	if err != nil {
		return fmt.Errorf("jsonrpc: %s: malformed response: %w", c.url, err)
	}
	if r.Error != nil {
		return r.Error
	}
	if !bytes.Equal(r.ID, id) {
		return fmt.Errorf("jsonrpc: %s: response id %s does not match request id %s", c.url, r.ID, id)
	}
	return r.UnmarshalResult(result)
}

// Notify implements jsonrpc.Caller.
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	msg, err := jsonrpc.EncodeRequest(method, params, nil)
	if err != nil {
		return err
	}
	body, status, err := c.post(ctx, msg)
	if err != nil {
		return err
	}
	if status != http.StatusNoContent && status != http.StatusOK {
		return fmt.Errorf("jsonrpc: %s: HTTP %d: %s", c.url, status, bytes.TrimSpace(body))
	}
	return nil
}

// Post sends one raw frame and returns the raw response body and status.
func (c *Client) Post(ctx context.Context, frame []byte) ([]byte, int, error) {
	return c.post(ctx, frame)
}

func (c *Client) post(ctx context.Context, msg []byte) ([]byte, int, error) {
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

// Close implements jsonrpc.Caller; it releases idle connections.
func (c *Client) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}

// NewServer returns an http.Server for h hardened with the limits of s:
// headers must arrive within HeaderTimeout and a whole request within
// HeaderTimeout+LineTimeout, idle keep-alive connections are closed after
// IdleTimeout or 2 minutes, whichever is shorter, and headers are bounded
// to 64 KiB. Serve it on Listener(s, l) so that its connections count
// against MaxConns. Responses have no overall deadline, so long polls keep
// working; the bridge bounds its own writes per 64 KiB (WriteTimeout).
func NewServer(s *jsonrpc.Server, h http.Handler) *http.Server {
	o := s.Options()
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: o.HeaderTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug),
	}
	if d := o.LineTimeout; d > 0 {
		hs.ReadTimeout = hs.ReadHeaderTimeout + d
	}
	hs.IdleTimeout = httpIdle
	if d := o.IdleTimeout; d > 0 {
		hs.IdleTimeout = min(d, httpIdle)
	}
	return hs
}

// maxHeaderBytes bounds the headers of an HTTP request.
const maxHeaderBytes = 64 << 10

// httpIdle bounds how long an idle keep-alive HTTP connection keeps its
// slot (IdleTimeout, when shorter, wins).
const httpIdle = 2 * time.Minute

// Listener wraps l so that each HTTP connection it accepts holds one of
// the connection slots of s, as a non-owner peer, until it is closed. A
// connection over the budget is answered 503 with a ServerBusy body and
// closed, without reaching the http.Server.
func Listener(s *jsonrpc.Server, l net.Listener) net.Listener {
	return s.Listener(l, "http", busy)
}

// busy is the 503 response that refuses a connection over the budget.
func busy(e *jsonrpc.Error) []byte {
	body := jsonrpc.EncodeError(nil, e)
	msg := fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n", len(body))
	return append(msg, body...)
}
