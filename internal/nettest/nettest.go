// Package nettest holds network helpers for tests: a listener that counts
// the connections it is offered, for tests that must show a dial was (or
// was not) made, and an address of this machine that a dialler takes for
// another machine's.
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

// RoutableIPv4 returns an IPv4 address of one of this machine's interfaces
// that is neither loopback nor link-local — what a dialler takes for
// another machine's — or skips the test when the machine has none.
func RoutableIPv4(t testing.TB) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("interface addresses: %v", err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
			return ipn.IP.String()
		}
	}
	t.Skip("no routable IPv4 interface address here")
	return ""
}
