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
