package host_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/jsonrpc"
)

// TestRegisterStreamSync: a streaming capability declares modes sync and
// stream; a direct call of its method (sync mode) answers the terminal
// result only, with a chunk that does not encode failing the call; a nil
// handler is refused.
func TestRegisterStreamSync(t *testing.T) {
	h, err := host.New(host.Info{Name: "s", Version: "1.0.0", Domain: "count", License: "MIT"},
		&host.Config{Socket: filepath.Join(t.TempDir(), "s.sock"), Ephemeral: true, NoAnnounce: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	type in struct {
		N   int  `json:"n"`
		Bad bool `json:"bad,omitempty"`
	}
	err = host.RegisterStream(h, "count.up", func(_ context.Context, in in, s *host.Stream) (int, error) {
		for i := range in.N {
			if err := s.Send(i); err != nil {
				return 0, err
			}
		}
		if in.Bad {
			if err := s.Send(func() {}); err != nil {
				return 0, err
			}
		}
		return in.N, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := host.RegisterStream[in, int](h, "count.nil", nil); err == nil {
		t.Fatal("a nil stream handler was registered")
	}
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx) }()
	defer func() {
		stop()
		<-done
	}()
	<-h.Ready()
	c, err := jsonrpc.Dial(ctx, "unix", h.Addr("unix"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var n int
	if err := c.Call(ctx, "count.up", map[string]any{"n": 3}, &n); err != nil || n != 3 {
		t.Fatalf("direct call: %d %v", n, err)
	}
	err = c.Call(ctx, "count.up", map[string]any{"n": 1, "bad": true}, &n)
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		t.Fatalf("a chunk that does not encode: %v", err)
	}
	var desc struct {
		Capabilities []chp.CapabilityDescriptor `json:"capabilities"`
	}
	if err := c.Call(ctx, "chp.describe", nil, &desc); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(desc.Capabilities, func(d chp.CapabilityDescriptor) bool { return d.ID == "count.up" })
	if i < 0 || !slices.Equal(desc.Capabilities[i].Modes, []string{"sync", "stream"}) {
		t.Fatalf("count.up not described with modes [sync stream]: %+v", desc.Capabilities)
	}
}
