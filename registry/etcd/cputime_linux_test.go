package etcd_test

import (
	"syscall"
	"time"
	"unsafe"
)

// threadCPU is the CPU time the calling OS thread has used
// (CLOCK_THREAD_CPUTIME_ID). On a machine shared with other work, wall-clock
// percentiles mostly measure the scheduler; the thread's CPU time measures
// the operation, including any GC assist it was charged. Callers lock
// their goroutine to its thread.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}

const haveThreadCPU = true
