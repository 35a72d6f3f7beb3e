//go:build unix

package evidence

import "syscall"

// mapArena returns n bytes of memory outside the Go heap, faulted in
// (populated) ahead of use, or nil when the system refuses: the caller then
// uses the heap. Memory arenas live outside the heap so that the store's
// growth neither counts toward the garbage collector's heap goal (which
// would make every collection leave twice the store's size of fresh memory
// to fault in for garbage) nor is ever scanned.
func mapArena(n int) []byte {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|mapPopulate)
	if err != nil {
		return nil
	}
	if mapPopulate == 0 {
		for i := 0; i < len(b); i += 4096 {
			b[i] = 0
		}
	}
	return b
}

// unmapArena releases what mapArena returned.
func unmapArena(b []byte) { _ = syscall.Munmap(b[:cap(b)]) }
