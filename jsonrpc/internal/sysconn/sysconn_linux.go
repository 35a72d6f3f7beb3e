//go:build linux

package sysconn

import (
	"net"
	"syscall"
)

// EMFILE is the error of a process out of file descriptors.
var EMFILE error = syscall.EMFILE

// Cred returns the credentials of the peer of a Unix socket as the kernel
// reports them (SO_PEERCRED); ok is false when they cannot be read.
func Cred(uc *net.UnixConn) (uid, gid uint32, pid int32, ok bool) {
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, 0, 0, false
	}
	_ = raw.Control(func(fd uintptr) {
		cred, err := syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
		if err == nil {
			uid, gid, pid, ok = cred.Uid, cred.Gid, cred.Pid, true
		}
	})
	return uid, gid, pid, ok
}
