package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/creachadair/jrpc2/channel"
	"github.com/creachadair/jrpc2/handler"
	jrpc2server "github.com/creachadair/jrpc2/server"
	sgjsonrpc2 "github.com/sourcegraph/jsonrpc2"

	"github.com/capmesh/capmesh/jsonrpc"
)

// The request every benchmark sends and the response the raw echo returns:
// the exact bytes capmesh itself produces for health.liveness.
var (
	livenessReq  = []byte(`{"jsonrpc":"2.0","method":"health.liveness","id":1}` + "\n")
	livenessResp = []byte(`{"jsonrpc":"2.0","result":{"status":"alive"},"id":1}` + "\n")
)

// A server under test: start returns a listener address; stop shuts it down.
type serverKind struct {
	name  string
	start func(b *testing.B, l net.Listener) (stop func())
}

var servers = []serverKind{
	{"echo", startEcho},
	{"capmesh", startCapmesh},
	{"capmesh-go", startCapmeshGoroutine},
	{"jrpc2", startJrpc2},
	{"sourcegraph", startSourcegraph},
}

// startEcho is the physical limit: read a line, write the canned response.
func startEcho(b *testing.B, l net.Listener) func() {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				br := bufio.NewReaderSize(c, 32<<10)
				bw := bufio.NewWriterSize(c, 32<<10)
				for {
					if _, err := br.ReadSlice('\n'); err != nil {
						return
					}
					bw.Write(livenessResp)
					if br.Buffered() == 0 {
						if bw.Flush() != nil {
							return
						}
					}
				}
			}()
		}
	}()
	return func() { l.Close(); wg.Wait() }
}

// startCapmesh serves health.liveness the way capmesh hosts do: an inline
// handler returning pre-encoded bytes.
func startCapmesh(b *testing.B, l net.Listener) func() {
	var alive any = json.RawMessage(`{"status":"alive"}`)
	return serveCapmesh(l, jsonrpc.Inline(jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return alive, nil
	})))
}

// startCapmeshGoroutine serves it as an ordinary user handler would: a
// goroutine per call and a map encoded with encoding/json.
func startCapmeshGoroutine(b *testing.B, l net.Listener) func() {
	return serveCapmesh(l, jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return map[string]string{"status": "alive"}, nil
	}))
}

func serveCapmesh(l net.Listener, h jsonrpc.Handler) func() {
	srv := jsonrpc.NewServer(jsonrpc.Map{"health.liveness": h}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, l); close(done) }()
	return func() { cancel(); <-done }
}

func startJrpc2(b *testing.B, l net.Listener) func() {
	m := handler.Map{"health.liveness": handler.New(func(context.Context) (map[string]string, error) {
		return map[string]string{"status": "alive"}, nil
	})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = jrpc2server.Loop(ctx, jrpc2server.NetAccepter(l, channel.Line), jrpc2server.Static(m), nil)
		close(done)
	}()
	return func() { cancel(); l.Close(); <-done }
}

func startSourcegraph(b *testing.B, l net.Listener) func() {
	h := sgjsonrpc2.HandlerWithError(func(context.Context, *sgjsonrpc2.Conn, *sgjsonrpc2.Request) (any, error) {
		return map[string]string{"status": "alive"}, nil
	})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []*sgjsonrpc2.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conn := sgjsonrpc2.NewConn(context.Background(), sgjsonrpc2.NewPlainObjectStream(c), h)
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	return func() {
		l.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			c.Close()
			<-c.DisconnectNotify()
		}
		mu.Unlock()
	}
}

func listen(b *testing.B, network string) net.Listener {
	var l net.Listener
	var err error
	if network == "unix" {
		l, err = net.Listen("unix", filepath.Join(b.TempDir(), "b.sock"))
	} else {
		l, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// rawClient is the same plain newline client for every server.
type rawClient struct {
	c  net.Conn
	br *bufio.Reader
}

func dial(b *testing.B, l net.Listener) *rawClient {
	c, err := net.Dial(l.Addr().Network(), l.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	return &rawClient{c: c, br: bufio.NewReaderSize(c, 64<<10)}
}

func (r *rawClient) roundTrip() error {
	if _, err := r.c.Write(livenessReq); err != nil {
		return err
	}
	_, err := r.br.ReadSlice('\n')
	return err
}

func reportRate(b *testing.B, start time.Time) {
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "rt/s")
}

// BenchmarkRoundTrip measures health.liveness round trips for each server
// over Unix sockets and TCP in three patterns:
//
//   - seq: one connection, one call at a time;
//   - pipe: one connection, up to 64 calls outstanding (a writer and a
//     reader goroutine);
//   - conns64: 64 connections, each sequential.
//
// The client is the same raw newline client for every server, so the
// figures compare servers. rt/s is round trips per second; allocs/op
// counts the whole process (client + server) per round trip.
func BenchmarkRoundTrip(b *testing.B) {
	for _, network := range []string{"unix", "tcp"} {
		for _, pattern := range []string{"seq", "pipe", "conns64"} {
			for _, s := range servers {
				b.Run(fmt.Sprintf("%s/%s/%s", network, pattern, s.name), func(b *testing.B) {
					l := listen(b, network)
					stop := s.start(b, l)
					defer stop()
					switch pattern {
					case "seq":
						benchSeq(b, l)
					case "pipe":
						benchPipe(b, l, 64)
					case "conns64":
						benchConns(b, l, 64)
					}
				})
			}
		}
	}
}

func benchSeq(b *testing.B, l net.Listener) {
	c := dial(b, l)
	defer c.c.Close()
	if err := c.roundTrip(); err != nil { // warm up
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if err := c.roundTrip(); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, start)
}

func benchPipe(b *testing.B, l net.Listener, window int) {
	c := dial(b, l)
	defer c.c.Close()
	if err := c.roundTrip(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	credits := make(chan struct{}, window)
	for range window {
		credits <- struct{}{}
	}
	errc := make(chan error, 1)
	go func() {
		bw := bufio.NewWriterSize(c.c, 32<<10)
		for i := 0; i < b.N; i++ {
			<-credits
			bw.Write(livenessReq)
			// Flush when no more credit is immediately available, so
			// requests go out in bursts as a pipelining client sends them.
			if len(credits) == 0 || i == b.N-1 {
				if err := bw.Flush(); err != nil {
					errc <- err
					return
				}
			}
		}
		errc <- nil
	}()
	for range b.N {
		if _, err := c.br.ReadSlice('\n'); err != nil {
			b.Fatal(err)
		}
		credits <- struct{}{}
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	reportRate(b, start)
}

func benchConns(b *testing.B, l net.Listener, n int) {
	clients := make([]*rawClient, n)
	for i := range clients {
		clients[i] = dial(b, l)
		if err := clients[i].roundTrip(); err != nil {
			b.Fatal(err)
		}
	}
	defer func() {
		for _, c := range clients {
			c.c.Close()
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	per := b.N / n
	extra := b.N % n
	errc := make(chan error, n)
	for i, c := range clients {
		k := per
		if i < extra {
			k++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range k {
				if err := c.roundTrip(); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		b.Fatal(err)
	}
	reportRate(b, start)
}
