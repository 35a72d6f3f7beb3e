//go:build !linux

package jsonrpc

import (
	"errors"
	"net"
)

var syscallEMFILE = errors.New("EMFILE")

func peerOf(c net.Conn) Peer {
	p := Peer{Transport: transportOf(c)}
	if a := c.RemoteAddr(); a != nil {
		p.Addr = a.String()
	}
	return p
}

// fdLimit returns 0: the descriptor limit is not consulted here.
func fdLimit() int64 { return 0 }
