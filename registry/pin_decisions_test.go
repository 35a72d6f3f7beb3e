package registry_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/descriptor"
)

// TestSchemes: a descriptor's endpoint may carry any RFC 3986 scheme token
// (letter first, then letters, digits, "+", "-", "."), and nothing else;
// the router's dialer reaches unix and tcp endpoints (http(s):
// TestDialEndpointHTTPDefaultPath) and never connects to a ws/wss peer.
func TestSchemes(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	pub := key.Public().(ed25519.PublicKey)
	for _, c := range []struct {
		scheme string
		ok     bool
	}{
		{"tcp", true}, {"https", true}, {"wss", true}, {"git+ssh", true}, {"X-my.proto1", true},
		{"1tcp", false}, {"t cp", false}, {"tcp:", false}, {"+tcp", false}, {"tcp/1", false},
	} {
		d := descriptor.New("a", "net", pub, []string{"c"}, descriptor.Endpoint{Host: "h", Port: 1, Scheme: "placeholder"}, time.Now(), time.Minute)
		if err := d.Sign(key); err != nil {
			t.Fatal(err)
		}
		raw, err := d.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		raw = bytes.Replace(raw, []byte(`"scheme":"placeholder"`), []byte(`"scheme":"`+c.scheme+`"`), 1)
		got, err := descriptor.Parse(raw)
		switch {
		case c.ok && err != nil:
			t.Errorf("scheme %q refused: %v", c.scheme, err)
		case c.ok && got.Endpoint.Scheme != c.scheme:
			t.Errorf("scheme %q parsed as %q", c.scheme, got.Endpoint.Scheme)
		case !c.ok && err == nil:
			t.Errorf("scheme %q accepted", c.scheme)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := jsonrpc.NewServer(jsonrpc.Map{"ping": jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return "pong", nil
	})}, nil)
	var accepted atomic.Int32
	serveOn := func(network, addr string) string {
		l, err := net.Listen(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				go srv.ServeConn(ctx, c)
			}
		}()
		return l.Addr().String()
	}
	tcpAddr := serveOn("tcp", "127.0.0.1:0")
	unixPath := serveOn("unix", filepath.Join(t.TempDir(), "p.sock"))
	for _, ep := range []string{"tcp://" + tcpAddr, "unix://" + unixPath} {
		c, err := registry.DialEndpoint(ctx, ep)
		if err != nil {
			t.Fatalf("%s: %v", ep, err)
		}
		var got string
		err = c.Call(ctx, "ping", nil, &got)
		c.Close()
		if err != nil || got != "pong" {
			t.Fatalf("ping over %s: %q, %v", ep, got, err)
		}
	}
	before := accepted.Load()
	for _, ep := range []string{"ws://" + tcpAddr, "wss://" + tcpAddr} {
		if c, err := registry.DialEndpoint(ctx, ep); err == nil {
			c.Close()
			t.Errorf("%s: dialed", ep)
		}
	}
	if n := accepted.Load() - before; n != 0 {
		t.Errorf("ws/wss endpoints made %d connections", n)
	}
}
