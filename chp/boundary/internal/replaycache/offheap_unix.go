//go:build unix

package replaycache

import "syscall"

// mapBytes returns n bytes of zeroed memory outside the Go heap, or nil
// when the system refuses (the caller then uses the heap). The replay cache
// keeps recorded results there: held for hours, by the hundred thousand,
// they would otherwise make most of the live heap, and the garbage
// collector's goal — twice the live heap — would spread every invocation's
// short-lived garbage over ever colder memory.
func mapBytes(n int) []byte {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil
	}
	return b
}

// unmapBytes releases what mapBytes returned.
func unmapBytes(b []byte) { _ = syscall.Munmap(b[:cap(b)]) }
