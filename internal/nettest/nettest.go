// Package nettest holds network helpers for tests: a listener that counts
// the connections it is offered, for tests that must show a dial was (or
// was not) made.
package nettest

import (
	"net"
	"sync/atomic"
	"testing"
)

// CountAccepts accepts connections on l until the test ends, counting
// them and closing each at once; the cleanup closes l and waits for the
// accepting goroutine.
func CountAccepts(t testing.TB, l net.Listener) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return &n
}
