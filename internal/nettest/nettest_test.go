package nettest

import (
	"net"
	"testing"
	"time"
)

func TestCountAccepts(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := CountAccepts(t, l)
	for range 3 {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	deadline := time.Now().Add(20 * time.Second)
	for n.Load() != 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := n.Load(); got != 3 {
		t.Fatalf("counted %d connections, want 3", got)
	}
}
