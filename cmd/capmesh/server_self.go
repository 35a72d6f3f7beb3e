package main

import (
	"context"
	"log/slog"

	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/registry"
)

// declareSelfWhenReady tells the registry, once the node's host has bound
// its listeners, at which endpoints the node itself listens, so that no
// registration can point the router back at the node (a routing loop).
func declareSelfWhenReady(ctx context.Context, node *registry.Node, h *host.Host, log *slog.Logger) {
	go func() {
		select {
		case <-h.Ready():
		case <-ctx.Done():
			return
		}
		var eps []string
		if p := h.Addr("unix"); p != "" {
			eps = append(eps, "unix://"+p)
		}
		if a := h.Addr("tcp"); a != "" {
			eps = append(eps, "tcp://"+a)
		}
		if a := h.Addr("http"); a != "" {
			eps = append(eps, "http://"+a+"/jsonrpc")
		}
		if err := node.AddSelfEndpoints(eps...); err != nil {
			log.Warn("registry: cannot declare the node's own endpoints", "err", err)
		}
	}()
}
