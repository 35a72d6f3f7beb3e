//go:build unix

package xdg

import (
	"io/fs"
	"os"
	"syscall"
)

func checkOwner(fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if int(st.Uid) != os.Getuid() {
		return errNotOwner
	}
	return nil
}
