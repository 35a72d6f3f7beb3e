package node

import (
	"context"
	"path/filepath"

	"github.com/capmesh/capmesh/endpoint"
)

// declareSelf tells the registry at which endpoints the node itself
// listens, so that no registration can point the router back at the node
// (a routing loop): the configured ones at once, before anything is
// served, and the bound ones (a symlink to the socket is recognised by the
// socket file, which exists only then) once the host is ready.
func declareSelf(ctx context.Context, n *Node) {
	add := func(eps ...string) {
		if err := n.reg.AddSelfEndpoints(eps...); err != nil {
			n.log.Warn("registry: cannot declare the node's own endpoints", "err", err)
		}
	}
	var eps []string
	if !n.cfg.NoSocket {
		sock := n.cfg.Socket
		if sock == "" {
			if dir, _, err := endpoint.SocketDir(); err == nil {
				sock = filepath.Join(dir, endpoint.SocketName(n.cfg.Name))
			}
		}
		if sock != "" {
			eps = append(eps, "unix://"+sock)
		}
	}
	if n.cfg.TCP != "" {
		eps = append(eps, "tcp://"+n.cfg.TCP)
	}
	if n.cfg.HTTP != "" {
		eps = append(eps, "http://"+n.cfg.HTTP+"/jsonrpc")
	}
	add(eps...)
	go func() {
		select {
		case <-n.host.Ready():
		case <-ctx.Done():
			return
		}
		eps = eps[:0]
		if p := n.host.Addr("unix"); p != "" {
			eps = append(eps, "unix://"+p)
		}
		if a := n.host.Addr("tcp"); a != "" {
			eps = append(eps, "tcp://"+a)
		}
		if a := n.host.Addr("http"); a != "" {
			eps = append(eps, "http://"+a+"/jsonrpc")
		}
		add(eps...)
	}()
}
