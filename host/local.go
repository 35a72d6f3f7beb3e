package host

import (
	"context"
	"net"

	"github.com/capmesh/capmesh/jsonrpc"
)

// LocalClient returns a client connected to the host in memory (a
// net.Pipe), served exactly as a socket connection would be — the same
// dispatcher, built-ins, CHP boundary and limits — without binding
// anything. It is meant for tests and for calling a host from its own
// process. Closing the client ends the connection; ctx bounds it too.
func (h *Host) LocalClient(ctx context.Context) *jsonrpc.Client {
	if h.tab.Load() == nil {
		h.publish()
	}
	h.accepting.Store(true)
	opts := h.cfg.RPC
	opts.Logger = h.log
	srv := jsonrpc.NewServer(h, &opts)
	sc, cc := net.Pipe()
	go func() {
		srv.ServeConn(ctx, sc)
		// The connection is over: release the server's worker goroutines.
		_ = srv.Shutdown(context.WithoutCancel(ctx))
	}()
	return jsonrpc.NewClient(cc, nil)
}
