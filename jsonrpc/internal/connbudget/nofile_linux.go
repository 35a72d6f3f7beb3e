//go:build linux

package connbudget

import "syscall"

// fdLimit returns the soft RLIMIT_NOFILE, or 0 if unknown.
func fdLimit() int64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<40 {
		return 0
	}
	return int64(rl.Cur)
}
