//go:build linux

package jsonrpc

import (
	"net"
	"syscall"
)

var syscallEMFILE error = syscall.EMFILE

// peerOf describes the remote end of c, with SO_PEERCRED credentials for a
// Unix socket.
func peerOf(c net.Conn) Peer {
	p := Peer{Transport: transportOf(c)}
	if a := c.RemoteAddr(); a != nil {
		p.Addr = a.String()
	}
	uc, ok := underlyingConn(c).(*net.UnixConn)
	if !ok {
		return p
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return p
	}
	_ = raw.Control(func(fd uintptr) {
		cred, err := syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
		if err == nil {
			p.HasCred, p.UID, p.GID, p.PID = true, cred.Uid, cred.Gid, cred.Pid
		}
	})
	return p
}
