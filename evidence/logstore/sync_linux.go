//go:build linux

package logstore

import (
	"os"
	"syscall"
)

// datasync makes the file's data durable without waiting for metadata that
// reading it back does not need (fdatasync(2): the size is still synced).
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
