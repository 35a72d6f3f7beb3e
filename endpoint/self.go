package endpoint

import (
	"errors"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
)

// SelfSet is the set of endpoints at which a program itself listens, so
// that it never registers or dials one of them (a routing loop). It also
// recognises an endpoint that reaches one of them by another name: a
// symlink to the socket, or another address of this machine with the same
// port. The zero value is an empty set, safe for concurrent use.
type SelfSet struct {
	mu    sync.RWMutex
	paths map[string]os.FileInfo // Unix socket path → its file, for os.SameFile
	ports map[string]bool        // TCP ports listened on
	local map[string]bool        // IP addresses of this machine's interfaces
}

// Add declares endpoints at which the program listens
// ("unix:///run/…/x.sock", "tcp://127.0.0.1:9000",
// "http://127.0.0.1:8080/jsonrpc"; empty strings are ignored). Call it
// once the listeners are bound (a server learns its ports then).
func (s *SelfSet) Add(eps ...string) error {
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
		u, err := Normalize(ep)
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

// Contains reports whether ep (a normalized endpoint) reaches one of the
// set's endpoints.
func (s *SelfSet) Contains(ep string) bool {
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

// LocalOnly reports whether ep (a normalized endpoint) names an address
// that reaches the machine it is dialled from, whichever machine that is:
// a Unix socket, an empty host (tcp://:PORT), a loopback, unspecified or
// link-local IP in any spelling (IPv4-mapped, with a zone: LocalAddr), or
// a localhost name. It reads the text only: a name that resolves to
// loopback is caught when it is dialled (RefuseLocal).
func LocalOnly(ep string) bool {
	if strings.HasPrefix(ep, "unix://") {
		return true
	}
	host, _, ok := hostPort(ep)
	return ok && localHost(host)
}

// localNames are host names that resolve to loopback by convention.
var localNames = map[string]bool{"localhost": true, "localhost.localdomain": true, "ip6-localhost": true, "ip6-loopback": true}

// localHost is LocalOnly for a host of an endpoint.
func localHost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "" || localNames[h] || strings.HasSuffix(h, ".localhost") {
		return true
	}
	if i := strings.IndexByte(h, '%'); i >= 0 {
		h = h[:i] // a zone: the address is the same on every interface
	}
	a, err := netip.ParseAddr(h)
	return err == nil && LocalAddr(a)
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

// Gone reports whether err, from dialling ep, means that no one listens
// there any more: the Unix socket file is missing (ENOENT) or has no
// listener (ECONNREFUSED). A timeout or any TCP error proves nothing.
func Gone(ep string, err error) bool {
	return strings.HasPrefix(ep, "unix://") && (errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT))
}
