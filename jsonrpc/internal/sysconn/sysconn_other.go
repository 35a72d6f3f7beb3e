//go:build !linux

package sysconn

import (
	"errors"
	"net"
)

// EMFILE stands for the error of a process out of file descriptors, which
// this platform does not report as such.
var EMFILE = errors.New("EMFILE")

// Cred reports no credentials: SO_PEERCRED is Linux's.
func Cred(*net.UnixConn) (uid, gid uint32, pid int32, ok bool) { return 0, 0, 0, false }
