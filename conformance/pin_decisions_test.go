package conformance_test

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/capmesh/capmesh/conformance"
	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
)

// fullListener listens on loopback TCP with a backlog of 0 and fills its
// accept queue, so that the kernel drops the SYN of the next connection
// until something is accepted (the client retransmits it about 1 s later).
func fullListener(t *testing.T) (net.Listener, string) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "listener")
	defer f.Close()
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	l, err := net.FileListener(f)
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	// Queue connections until one is not completed: the queue is full.
	for i := 0; ; i++ {
		if i == 64 {
			l.Close()
			t.Skip("the kernel keeps completing connections to a full accept queue")
		}
		c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				break
			}
			l.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	return l, addr
}

// TestNamedEndpointConnectTimeout: the first connection to an endpoint the
// user named may take seconds (here a SYN the kernel dropped, answered on
// its retransmission about 1 s later, after the scan bound of 250 ms): the
// host is audited, not reported unreachable.
func TestNamedEndpointConnectTimeout(t *testing.T) {
	l, addr := fullListener(t)
	srv := jsonrpc.NewServer(jsonrpc.Map{"ping": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return "pong", nil
	})}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	defer func() {
		cancel()
		if err := <-served; !errors.Is(err, jsonrpc.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	}()
	ep, err := endpoint.Parse("tcp://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	reports := make(chan *conformance.HostReport, 1)
	go func() {
		reports <- conformance.Audit(context.Background(), ep, &conformance.Options{ProbeTimeout: 10 * time.Second})
	}()
	// Let the audit's first SYN be dropped and the 250 ms scan bound pass
	// before anything is accepted. (On a machine too slow to have dialled
	// by then the test passes without proving anything.)
	time.Sleep(3 * conformance.ScanConnectTimeout)
	go func() { served <- srv.Serve(ctx, l) }()
	select {
	case rep := <-reports:
		if !rep.Reachable {
			t.Fatalf("named endpoint reported unreachable: %s", rep.Error)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("audit did not finish")
	}
}
