// Package endpoint knows where capmesh processes listen and how to reach
// them: the socket locations of the Primal IPC Protocol v3.1 (the biomeos
// directory, family-scoped names, capability-domain symlinks), safe Unix
// socket creation (0700 directory, 0600 socket, stale-socket cleanup that
// never steals a live socket), and addresses of the form unix:///path,
// tcp://host:port and http://host:port[/path].
//
// Data flow: a host asks SocketPath(name) where to listen and ListenUnix to
// bind there (plus a domain symlink); a client turns an address string into
// a connection with Dial, which returns a jsonrpc.Caller for every scheme.
package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/jsonrpc/jhttp"
)

// Address is a parsed capmesh endpoint address.
type Address struct {
	// Scheme is "unix", "tcp", "http" or "https".
	Scheme string
	// Host is host:port for tcp and http(s).
	Host string
	// Path is the socket path for unix, the URL path for http(s).
	Path string
}

// Parse parses an endpoint address: "unix:///run/x.sock", "unix:x.sock",
// "tcp://127.0.0.1:9000", "http://127.0.0.1:8080/jsonrpc". A bare path (one
// containing a '/' or ending in ".sock") is a Unix socket; a bare
// "host:port" is TCP.
func Parse(s string) (Address, error) {
	if s == "" {
		return Address{}, errors.New("endpoint: empty address")
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		switch {
		case strings.HasPrefix(s, "unix:"):
			return unixAddr(strings.TrimPrefix(s, "unix:"))
		case strings.Contains(s, "/") || strings.HasSuffix(s, ".sock"):
			return unixAddr(s)
		}
		if _, _, err := net.SplitHostPort(s); err == nil {
			return Address{Scheme: "tcp", Host: s}, nil
		}
		return Address{}, fmt.Errorf("endpoint: %q: want unix:///path, tcp://host:port, http://host:port or a socket path", s)
	}
	switch scheme {
	case "unix":
		return unixAddr(rest)
	case "tcp":
		if _, _, err := net.SplitHostPort(rest); err != nil {
			return Address{}, fmt.Errorf("endpoint: %q: want tcp://host:port: %w", s, err)
		}
		return Address{Scheme: "tcp", Host: rest}, nil
	case "http", "https":
		u, err := url.Parse(s)
		if err != nil {
			return Address{}, fmt.Errorf("endpoint: %q: %w", s, err)
		}
		if u.Host == "" {
			return Address{}, fmt.Errorf("endpoint: %q: missing host", s)
		}
		p := u.Path
		if p == "" || p == "/" {
			p = "/jsonrpc"
		}
		return Address{Scheme: scheme, Host: u.Host, Path: p}, nil
	default:
		return Address{}, fmt.Errorf("endpoint: %q: unknown scheme %q (want unix, tcp or http)", s, scheme)
	}
}

// Normalize parses s as an endpoint that other processes will dial — a
// registration's — and returns its canonical form (Address.String): any
// form Parse accepts, except that a Unix socket path must be absolute (it
// is cleaned) and a TCP port must be a port number. An http(s) URL without
// a path gets /jsonrpc, the path Dial posts to.
func Normalize(s string) (string, error) {
	a, err := Parse(s)
	if err != nil {
		return "", err
	}
	switch a.Scheme {
	case "unix":
		if !filepath.IsAbs(a.Path) {
			return "", fmt.Errorf("endpoint: %q: a socket path must be absolute", s)
		}
		a.Path = filepath.Clean(a.Path)
	case "tcp":
		_, port, _ := net.SplitHostPort(a.Host) // Parse checked the form
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return "", fmt.Errorf("endpoint: %q: port %q is not a port number", s, port)
		}
	}
	return a.String(), nil
}

func unixAddr(p string) (Address, error) {
	if p == "" {
		return Address{}, errors.New("endpoint: empty socket path")
	}
	return Address{Scheme: "unix", Path: p}, nil
}

// String formats a in the canonical form Parse accepts.
func (a Address) String() string {
	switch a.Scheme {
	case "unix":
		return "unix://" + a.Path
	case "tcp":
		return "tcp://" + a.Host
	default: // the path escaped, so that the string parses back to a
		return (&url.URL{Scheme: a.Scheme, Host: a.Host, Path: a.Path}).String()
	}
}

// Network returns the net package network name for stream addresses
// ("unix" or "tcp"), or "" for HTTP.
func (a Address) Network() string {
	switch a.Scheme {
	case "unix", "tcp":
		return a.Scheme
	}
	return ""
}

// DialAddr returns the address to pass to net.Dial.
func (a Address) DialAddr() string {
	if a.Scheme == "unix" {
		return a.Path
	}
	return a.Host
}

// DefaultDialTimeout bounds connection establishment when ctx has no
// deadline.
const DefaultDialTimeout = 5 * time.Second

// DialConn opens a stream connection to a unix or tcp address: raw, or
// secured with BTSP when the endpoint is of this process's family (see
// secure). Under RefuseLocal it refuses a Unix socket and a local TCP
// destination (ErrLocalDestination).
func DialConn(ctx context.Context, a Address) (net.Conn, error) {
	if a.Network() == "" {
		return nil, fmt.Errorf("endpoint: %s is not a stream address", a)
	}
	if a.Scheme == "unix" && LocalRefused(ctx) {
		return nil, &DialError{Addr: a, Err: ErrLocalDestination}
	}
	c, err := dialer(ctx).DialContext(ctx, a.Network(), a.DialAddr())
	if err != nil {
		return nil, &DialError{Addr: a, Err: err}
	}
	return secure(ctx, c, a)
}

// DialError reports a failure to reach an endpoint.
type DialError struct {
	Addr Address
	Err  error
}

// Error names the endpoint that could not be reached and why.
func (e *DialError) Error() string {
	return fmt.Sprintf("cannot connect to %s: %v", e.Addr, e.Err)
}

// Unwrap returns the underlying network error.
func (e *DialError) Unwrap() error { return e.Err }

// Dial connects to addr (any form Parse accepts) and returns a JSON-RPC
// caller: a pipelined newline client for unix and tcp, an HTTP bridge
// client for http(s).
func Dial(ctx context.Context, addr string) (jsonrpc.Caller, error) {
	a, err := Parse(addr)
	if err != nil {
		return nil, err
	}
	return DialAddress(ctx, a, nil)
}

// DialAddress is Dial for a parsed address, with client options for stream
// transports. When opts sets no OnNotify, the function WithNotify put in
// ctx, if any, takes its place.
func DialAddress(ctx context.Context, a Address, opts *jsonrpc.ClientOptions) (jsonrpc.Caller, error) {
	if a.Scheme == "http" || a.Scheme == "https" {
		return jhttp.NewClient(a.String(), httpClients.For(ctx)), nil
	}
	c, err := DialConn(ctx, a)
	if err != nil {
		return nil, err
	}
	if fn, ok := ctx.Value(notifyKey{}).(func(string, json.RawMessage)); ok && fn != nil && (opts == nil || opts.OnNotify == nil) {
		o := jsonrpc.ClientOptions{}
		if opts != nil {
			o = *opts
		}
		o.OnNotify = fn
		opts = &o
	}
	return jsonrpc.NewClient(c, opts), nil
}

type notifyKey struct{}

// WithNotify returns ctx carrying fn: a stream connection that Dial or
// DialAddress opens with the returned context calls fn with each
// notification the other end sends on it, in order, on the connection's
// reader (jsonrpc.ClientOptions.OnNotify; the HTTP bridge carries none). A
// node's router relays a provider's notifications to its caller this way,
// through registry.DialEndpoint, the default registry.Config.Dial.
func WithNotify(ctx context.Context, fn func(method string, params json.RawMessage)) context.Context {
	return context.WithValue(ctx, notifyKey{}, fn)
}
