package compose_test

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"testing"

	"github.com/capmesh/capmesh/compose"
	"github.com/capmesh/capmesh/conformance/fakehost"
	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
)

// serveSpec serves a JSON fakehost spec on a Unix socket in dir.
func serveSpec(t *testing.T, dir, name, spec string) string {
	t.Helper()
	s, err := fakehost.ParseSpec(name, []byte(spec), "")
	if err != nil {
		t.Fatal(err)
	}
	l, err := endpoint.ListenUnix(filepath.Join(dir, name+".sock"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { fakehost.Serve(ctx, l, s); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return l.Path()
}

// TestFromRegistry: ipc.list names three providers; one answers its own
// capabilities.list (consumption included), one is registered but gone,
// one is untrusted. Only the first can satisfy a need.
func TestFromRegistry(t *testing.T) {
	dir := t.TempDir()
	signer := serveSpec(t, dir, "signer", `{"answers":{"capabilities.list":{"result":{"primal":"signer","version":"1.0.0","methods":["crypto.sign"],"consumed_capabilities":["storage.put"]}}}}`)
	rogue := serveSpec(t, dir, "rogue", `{"answers":{"capabilities.list":{"result":{"primal":"rogue","version":"1.0.0","methods":["storage.put"]}}}}`)
	list := map[string]any{"services": []map[string]any{
		{"primal_id": "signer", "endpoint": "unix://" + signer, "capabilities": []string{"crypto"}, "trust": map[string]any{"trusted": true}},
		{"primal_id": "gone", "endpoint": "unix://" + filepath.Join(dir, "gone.sock"), "capabilities": []string{"dag.session.create"}, "trust": map[string]any{"trusted": true}},
		{"primal_id": "rogue", "endpoint": "unix://" + rogue, "capabilities": []string{"storage.put"}, "trust": map[string]any{"trusted": false, "reason": "revoked"}},
	}}
	srv := jsonrpc.NewServer(jsonrpc.Map{"ipc.list": jsonrpc.HandlerFunc(func(_ context.Context, r *jsonrpc.Request) (any, error) {
		var p struct {
			IncludeUntrusted bool `json:"include_untrusted"`
		}
		if err := json.Unmarshal(r.Params, &p); err != nil || !p.IncludeUntrusted {
			t.Errorf("ipc.list params %s: compose must ask for untrusted entries to report them", r.Params)
		}
		return list, nil
	})}, nil)
	regPath := filepath.Join(dir, "node.sock")
	l, err := net.Listen("unix", regPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, l)
	reg, err := endpoint.Dial(ctx, "unix://"+regPath)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()

	hosts, err := compose.FromRegistry(ctx, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &compose.Composition{}
	for _, h := range hosts {
		c.Add(h)
	}
	if h := c.Host("signer"); h == nil || !h.Live || !h.Trusted || len(h.Consumes) != 1 {
		t.Errorf("signer %+v", h)
	}
	if h := c.Host("gone"); h == nil || h.Live {
		t.Errorf("gone %+v", h)
	}
	if h := c.Host("rogue"); h == nil || !h.Live || h.Trusted {
		t.Errorf("rogue %+v", h)
	}
	a := compose.Analyze(c)
	if a.Complete || len(a.Missing) != 1 || a.Missing[0].Capability != "storage.put" {
		t.Fatalf("missing %+v", a.Missing)
	}
	if want := "rogue provides it but is not trusted"; a.Missing[0].Reason != want {
		t.Errorf("reason %q, want %q", a.Missing[0].Reason, want)
	}
}
