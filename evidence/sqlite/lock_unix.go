//go:build unix

package sqlite

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive advisory lock so that two processes never
// append to one log.
func lockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
