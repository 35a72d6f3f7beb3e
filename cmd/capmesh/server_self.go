package main

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/registry"
)

// declareSelf tells the registry at which endpoints the node itself
// listens, so that no registration can point the router back at the node
// (a routing loop): the configured ones at once, before anything is
// served, and the bound ones (a symlink to the socket is recognised by the
// socket file, which exists only then) once the host is ready.
func declareSelf(ctx context.Context, node *registry.Node, h *host.Host, f *serverFlags, hcfg *host.Config, log *slog.Logger) {
	add := func(eps ...string) {
		if err := node.AddSelfEndpoints(eps...); err != nil {
			log.Warn("registry: cannot declare the node's own endpoints", "err", err)
		}
	}
	var eps []string
	if !hcfg.NoSocket {
		sock := hcfg.Socket
		if sock == "" {
			if dir, _, err := endpoint.SocketDir(); err == nil {
				sock = filepath.Join(dir, endpoint.SocketName(f.name))
			}
		}
		if sock != "" {
			eps = append(eps, "unix://"+sock)
		}
	}
	if hcfg.TCP != "" {
		eps = append(eps, "tcp://"+hcfg.TCP)
	}
	if hcfg.HTTP != "" {
		eps = append(eps, "http://"+hcfg.HTTP+"/jsonrpc")
	}
	add(eps...)
	go func() {
		select {
		case <-h.Ready():
		case <-ctx.Done():
			return
		}
		eps = eps[:0]
		if p := h.Addr("unix"); p != "" {
			eps = append(eps, "unix://"+p)
		}
		if a := h.Addr("tcp"); a != "" {
			eps = append(eps, "tcp://"+a)
		}
		if a := h.Addr("http"); a != "" {
			eps = append(eps, "http://"+a+"/jsonrpc")
		}
		add(eps...)
	}()
}
