package jsonrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sort"
)

// Handler answers one request. The result is encoded with encoding/json,
// except a json.RawMessage, which is written as is (compacted first if it
// contains line breaks) and must hold valid JSON.
// A returned *Error or Code is sent as that error; any other error becomes
// InternalError carrying the error's text. For a notification the result is
// discarded. Handlers must honour ctx: it ends when the connection closes
// or the server shuts down.
type Handler interface {
	Handle(ctx context.Context, req *Request) (any, error)
}

// HandlerFunc adapts a function to the Handler interface.
type HandlerFunc func(ctx context.Context, req *Request) (any, error)

// Handle calls f(ctx, req).
func (f HandlerFunc) Handle(ctx context.Context, req *Request) (any, error) { return f(ctx, req) }

// Inline marks h as a handler that returns at once: no I/O, no waiting on
// locks or channels, no heavy computation (a health probe, a cached
// capabilities list). The server runs inline handlers on the connection's
// reader goroutine instead of starting a goroutine per call, which roughly
// doubles the throughput of pipelined trivial calls; the price is that a
// slow inline handler delays every later request of its connection. Leave
// anything that may block un-marked.
func Inline(h Handler) Handler { return inlineWrapper{h} }

type inlineHandler interface{ inline() }

type inlineWrapper struct{ Handler }

func (inlineWrapper) inline() {}

// Assigner maps a method name to the handler that serves it. A nil Handler
// means the method does not exist; the server then answers MethodNotFound
// naming it.
type Assigner interface {
	Assign(ctx context.Context, method string) Handler
}

// Lister is implemented by assigners that can enumerate their methods; the
// Capability Wire Standard's capabilities.list is built from it.
type Lister interface {
	Names() []string
}

// Map is an Assigner (and Lister) backed by a map from method name to
// handler.
type Map map[string]Handler

// Assign returns m[method].
func (m Map) Assign(_ context.Context, method string) Handler { return m[method] }

// Names returns the methods of m, sorted.
func (m Map) Names() []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// Peer describes the other end of a connection. Handlers get it with
// PeerFromContext.
type Peer struct {
	// Transport is "unix", "tcp" or "http".
	Transport string
	// Addr is the remote address (empty for an unnamed Unix socket peer).
	Addr string
	// HasCred reports whether UID, GID and PID hold the peer's credentials
	// as the kernel reported them (SO_PEERCRED on a Unix socket).
	HasCred bool
	UID     uint32
	GID     uint32
	PID     int32
	// Family is the family the peer proved membership of in a secure
	// transport handshake (BTSP), empty on a cleartext connection.
	Family string
}

// handshaker is a connection with a transport handshake to complete
// before its first message (a BTSP connection): the server runs it in the
// connection's own goroutine, never in the accept loop.
type handshaker interface {
	Handshake(ctx context.Context) error
	PeerFamily() string
}

// underlyingConn unwraps a connection layered over another (BTSP, as tls.Conn
// does) to the one whose socket holds the peer's credentials.
func underlyingConn(c net.Conn) net.Conn {
	for {
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return c
		}
		c = u.NetConn()
	}
}

type ctxKey int

const (
	peerKey ctxKey = iota
	notifierKey
)

// PeerFromContext returns the peer of the connection a request arrived on.
func PeerFromContext(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey).(*Peer)
	if !ok {
		return Peer{}, false
	}
	return *p, true
}

// ContextWithPeer returns a context carrying p, for tests and for
// in-process dispatch.
func ContextWithPeer(ctx context.Context, p Peer) context.Context {
	return context.WithValue(ctx, peerKey, &p)
}

// Notifier sends server-initiated notifications to the peer of a stream
// connection (for example the events of a watch). It is safe for concurrent
// use.
type Notifier interface {
	Notify(ctx context.Context, method string, params any) error
}

// NotifierFromContext returns the notifier of the stream connection a
// request arrived on. Requests that came over the HTTP bridge have none.
func NotifierFromContext(ctx context.Context) (Notifier, bool) {
	n, ok := ctx.Value(notifierKey).(Notifier)
	return n, ok
}

// encodeResult turns a handler's result into JSON bytes.
func encodeResult(v any) ([]byte, error) {
	switch r := v.(type) {
	case json.RawMessage:
		if len(r) == 0 {
			return []byte("null"), nil
		}
		// A pre-encoded result may be pretty-printed; a line break inside
		// it would end the frame early on a newline stream. Compacting
		// also validates it.
		if bytes.IndexByte(r, '\n') >= 0 || bytes.IndexByte(r, '\r') >= 0 {
			var out bytes.Buffer
			if err := json.Compact(&out, r); err != nil {
				return nil, fmt.Errorf("result is not valid JSON: %w", err)
			}
			return out.Bytes(), nil
		}
		return r, nil
	case nil:
		return []byte("null"), nil
	}
	return json.Marshal(v)
}

func transportOf(c interface{ LocalAddr() net.Addr }) string {
	if a := c.LocalAddr(); a != nil {
		switch a.Network() {
		case "unix", "unixpacket", "unixgram":
			return "unix"
		case "tcp", "tcp4", "tcp6":
			return "tcp"
		default:
			return a.Network()
		}
	}
	return ""
}
