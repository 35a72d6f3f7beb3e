package registry

import (
	"bytes"
	"encoding/json"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/internal/errcatalog"
	"github.com/capmesh/capmesh/jsonrpc"
)

// Routing-loop protection (docs/routing.md): every routed request carries
// a hop count in params._meta.hops, and the node never registers or routes
// to an endpoint of its own.

// DefaultMaxHops is Config.MaxHops' default: the routers a request may
// pass through, as the network policy's routing.max_hops.
const DefaultMaxHops = 6

// CodeHopLimit is the answer to a routed request whose _meta.hops has
// reached the node's MaxHops: it has been forwarded in a circle (or along
// a chain too long to be honest).
const CodeHopLimit jsonrpc.Code = errcatalog.HopLimitExceeded

// Refusal words of the loop protection.
const (
	CodeWordHopLimit  = "hop_limit_exceeded"
	CodeWordSelfRoute = "endpoint_is_this_node"
)

// nextHop checks the hop count of routed params and returns the params
// to forward, with _meta.hops one higher (params without _meta keep their
// bytes, the count inserted first). Absent params become
// {"_meta":{"hops":1}} (a capability host reads an object without members
// other than _meta as empty params); array params cannot carry the count
// and are refused.
func (n *Node) nextHop(params json.RawMessage) (json.RawMessage, error) {
	out, _, err := n.nextHopN(params)
	return out, err
}

// nextHopN is nextHop, also returning the hop count the forwarded call
// carries.
func (n *Node) nextHopN(params json.RawMessage) (json.RawMessage, int64, error) {
	p := bytes.TrimSpace(params)
	if len(p) == 0 || string(p) == "null" {
		return json.RawMessage(`{"_meta":{"hops":1}}`), 1, nil
	}
	if p[0] != '{' {
		return nil, 0, refuse(CodeWordInvalidParams, "a routed call takes object params: its hop count travels in params._meta.hops")
	}
	if !bytes.Contains(p, []byte("_meta")) && !bytes.Contains(p, []byte(`\u`)) && json.Valid(p) {
		// The common first hop: no member can be _meta (not even spelt
		// with escapes), so the caller's bytes go on with the count first.
		out := append(make([]byte, 0, len(p)+20), `{"_meta":{"hops":1}`...)
		if rest := bytes.TrimSpace(p[1:]); rest[0] != '}' {
			out = append(out, ',')
		}
		return append(out, p[1:]...), 1, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(p, &obj); err != nil {
		return nil, 0, refuse(CodeWordInvalidParams, "params: %v", err)
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := obj["_meta"]; ok && string(bytes.TrimSpace(raw)) != "null" {
		if err := json.Unmarshal(raw, &meta); err != nil || meta == nil {
			return nil, 0, refuse(CodeWordInvalidParams, "params._meta must be an object")
		}
	}
	var hops int64
	if raw, ok := meta["hops"]; ok {
		h, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
		if err != nil || h < 0 {
			return nil, 0, refuse(CodeWordInvalidParams, "params._meta.hops must be a non-negative integer")
		}
		hops = h
	}
	if hops >= int64(n.cfg.MaxHops) {
		e := refuse(CodeWordHopLimit, "the request has passed %d routers (limit %d): refusing to forward it again (a routing loop?)", hops, n.cfg.MaxHops)
		e.Details = map[string]any{"hops": hops, "max_hops": n.cfg.MaxHops}
		return nil, 0, e
	}
	meta["hops"] = json.RawMessage(strconv.FormatInt(hops+1, 10))
	obj["_meta"], _ = marshalNoEscape(meta)
	out, err := marshalNoEscape(obj)
	return out, hops + 1, err
}

func marshalNoEscape(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// selfEndpoints are the node's own listeners, which no registration may
// name and the router never dials.
type selfEndpoints struct {
	mu    sync.RWMutex
	paths map[string]os.FileInfo // Unix socket path → its file, for os.SameFile
	ports map[string]bool        // TCP ports the node listens on
	local map[string]bool        // IP addresses of this machine's interfaces
}

// AddSelfEndpoints declares endpoints at which this node itself listens
// ("unix:///run/…/capmesh.sock", "tcp://127.0.0.1:9000",
// "http://127.0.0.1:8080/jsonrpc"; empty strings are ignored). A
// registration naming one of them — also through a symlink to the socket,
// or another local address with the same port — is refused, and the router
// skips such an entry registered before. Call it once the listeners are
// bound (a server learns its ports then).
func (n *Node) AddSelfEndpoints(eps ...string) error {
	s := &n.self
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paths == nil {
		s.paths, s.ports, s.local = map[string]os.FileInfo{}, map[string]bool{}, map[string]bool{}
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok {
					s.local[ipn.IP.String()] = true
				}
			}
		}
	}
	for _, ep := range eps {
		if ep == "" {
			continue
		}
		u, err := endpoint.Normalize(ep)
		if err != nil {
			return err
		}
		if path, ok := strings.CutPrefix(u, "unix://"); ok {
			fi, _ := os.Stat(path)
			s.paths[path] = fi
			continue
		}
		if _, port, ok := hostPort(u); ok {
			s.ports[port] = true
		}
	}
	return nil
}

// isSelf reports whether ep (a normalized endpoint) reaches this node.
func (n *Node) isSelf(ep string) bool {
	s := &n.self
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.paths) == 0 && len(s.ports) == 0 {
		return false
	}
	if path, ok := strings.CutPrefix(ep, "unix://"); ok {
		if _, ok := s.paths[path]; ok {
			return true
		}
		fi, err := os.Stat(path)
		if err != nil {
			return false
		}
		for _, own := range s.paths {
			if own != nil && os.SameFile(fi, own) {
				return true
			}
		}
		return false
	}
	host, port, ok := hostPort(ep)
	if !ok || !s.ports[port] {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsUnspecified() || s.local[ip.String()])
}

// hostPort splits a tcp://, http:// or https:// endpoint.
func hostPort(ep string) (host, port string, ok bool) {
	if hp, found := strings.CutPrefix(ep, "tcp://"); found {
		h, p, err := net.SplitHostPort(hp)
		return h, p, err == nil
	}
	u, err := url.Parse(ep)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", "", false
	}
	port = u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Hostname(), port, true
}

// refuseSelf is the registration-time check.
func (n *Node) refuseSelf(ep string) error {
	if n.isSelf(ep) {
		return refuse(CodeWordSelfRoute, "endpoint %s is this registry node itself: routing to it would loop", ep)
	}
	return nil
}
