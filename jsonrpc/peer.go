package jsonrpc

import (
	"net"

	"github.com/capmesh/capmesh/jsonrpc/internal/sysconn"
)

// peerOf describes the remote end of c, with the kernel's credentials of
// a Unix socket's peer.
func peerOf(c net.Conn) Peer {
	p := Peer{Transport: transportOf(c)}
	if a := c.RemoteAddr(); a != nil {
		p.Addr = a.String()
	}
	if uc, ok := underlyingConn(c).(*net.UnixConn); ok {
		p.UID, p.GID, p.PID, p.HasCred = sysconn.Cred(uc)
	}
	return p
}
