package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
)

// Songbird compatibility: the shapes an unmodified ecoPrimals client sends
// and reads, beside capmesh's own (docs/DECISIONS.md, issue 17).

// localEndpoint picks the endpoint of an unsigned registration: "endpoint"
// (a string, or Songbird's tagged object), else "socket_path", else
// "socket". A virtual endpoint "/primal/<name>" — what the IPC standard's
// own ipc.register example sends — names no socket; with no socket given
// it stands for the primal's socket in the biomeos directory.
func localEndpoint(p registerParams) (string, error) {
	ep := ""
	if len(p.Endpoint) > 0 && string(p.Endpoint) != "null" {
		var s string
		if json.Unmarshal(p.Endpoint, &s) == nil {
			ep = s
		} else if ep = endpoint.EndpointOf(json.RawMessage(`{"endpoint":` + string(p.Endpoint) + `}`)); ep == "" {
			return "", registry.Refuse(registry.CodeWordInvalidParams, `endpoint %s: want a socket path, "unix:///path", "tcp://host:port" or {"transport":"uds","path":"/path"}`, p.Endpoint)
		}
	}
	virtual := strings.HasPrefix(ep, "/primal/")
	if ep == "" || virtual {
		if alt := nonEmpty(p.SocketPath, p.Socket); alt != "" {
			return alt, nil
		}
	}
	if virtual {
		name := strings.TrimPrefix(ep, "/primal/")
		if endpoint.ValidateName(name) != nil || !strings.EqualFold(name, p.name()) {
			return "", registry.Refuse(registry.CodeWordInvalidParams, "endpoint %q is a virtual endpoint, not an address: send the socket the primal listens on, as \"endpoint\": \"/run/user/<uid>/biomeos/%s.sock\" (or \"socket_path\")", ep, p.name())
		}
		sock, err := endpoint.SocketPath(name)
		if err != nil {
			return "", err
		}
		return sock, nil
	}
	return ep, nil
}

// resolved is the answer of ipc.resolve and capability.resolve: the
// provider view with Songbird's ResolveResult fields — "endpoint" as a
// tagged transport object, "native_endpoint" a transport-qualified URI,
// "socket" the bare path, "relay" false.
func resolved(e registry.Entry) map[string]any {
	b, _ := json.Marshal(toProvider(e))
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if t := transportEndpoint(e.Endpoint); t != nil {
		m["endpoint"] = t
	}
	m["relay"] = false
	return m
}

// transportEndpoint is Songbird's TransportEndpoint for a unix:// or
// tcp:// endpoint, nil for others (an HTTP endpoint stays a string).
func transportEndpoint(ep string) map[string]any {
	switch {
	case strings.HasPrefix(ep, "unix://"):
		return map[string]any{"transport": "uds", "path": filepath.Clean(strings.TrimPrefix(ep, "unix://"))}
	case strings.HasPrefix(ep, "tcp://"):
		host, port, err := net.SplitHostPort(strings.TrimPrefix(ep, "tcp://"))
		if p, perr := strconv.Atoi(port); err == nil && perr == nil {
			return map[string]any{"transport": "tcp", "host": host, "port": p}
		}
	}
	return nil
}

// withServices adds "services" (a copy of "providers") to the answer of
// the discover handler, {"capability":…,"providers":[…],"revision":N},
// splicing bytes rather than decoding a list that may be large. Inside
// JSON strings quotes are escaped, so the first `,"providers":[` is the
// key, and the last `],"revision":` closes the list.
func withServices(h jsonrpc.Handler) jsonrpc.Handler {
	return jsonrpc.HandlerFunc(func(ctx context.Context, r *jsonrpc.Request) (any, error) {
		res, err := h.Handle(ctx, r)
		raw, ok := res.(json.RawMessage)
		if err != nil || !ok {
			return res, err
		}
		const key, tail = `,"providers":`, `],"revision":`
		start := bytes.Index(raw, []byte(key))
		end := bytes.LastIndex(raw, []byte(tail))
		if start < 0 || end < start {
			return res, nil
		}
		list := raw[start+len(key) : end+1]
		out := make([]byte, 0, len(raw)+len(list)+16)
		out = append(out, raw[:end+1]...)
		out = append(append(out, `,"services":`...), list...)
		out = append(out, raw[end+1:]...)
		return json.RawMessage(out), nil
	})
}
