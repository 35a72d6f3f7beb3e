package api

import (
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
)

// FuzzNextHop: whatever params a routed call carries, the hop step either
// refuses them (-32602, or -32012 at the limit) or forwards an object
// with every member as it was and _meta.hops one higher, within the limit.
func FuzzNextHop(f *testing.F) {
	for _, s := range []string{``, `null`, `{}`, `[1]`, `{"a":1}`, `{"_meta":{"hops":5,"correlation_id":"c"}}`, `{"_meta":{"hops":6}}`,
		`{"_meta":{"hops":-1}}`, `{"_meta":{"hops":1e2}}`, `{"_meta":null,"a":"<&>"}`, `{"_meta":[]}`, `{"_meta":{"hops":99999999999999999999}}`} {
		f.Add([]byte(s))
	}
	n, err := registry.NewNode(registry.Config{SweepInterval: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	defer n.Close()
	f.Fuzz(func(t *testing.T, params []byte) {
		out, err := newServer(n).nextHop(params)
		if err != nil {
			var re *registry.Error
			if !errors.As(err, &re) || (re.RPC != jsonrpc.InvalidParams && re.RPC != registry.CodeHopLimit) {
				t.Fatalf("%q: error %v is not -32602 or -32012", params, err)
			}
			return
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil || got == nil {
			t.Fatalf("%q: forwarded %q is not an object: %v", params, out, err)
		}
		meta, _ := got["_meta"].(map[string]any)
		hops, _ := meta["hops"].(float64)
		if hops < 1 || hops > registry.DefaultMaxHops || hops != float64(int(hops)) {
			t.Fatalf("%q: forwarded hops %v", params, meta["hops"])
		}
		var in map[string]any
		if json.Unmarshal(params, &in) != nil || in == nil {
			in = map[string]any{}
		}
		inMeta, _ := in["_meta"].(map[string]any)
		if h, ok := inMeta["hops"].(float64); ok && h+1 != hops {
			t.Fatalf("%q: hops %v became %v", params, h, hops)
		}
		delete(in, "_meta")
		delete(got, "_meta")
		delete(inMeta, "hops")
		delete(meta, "hops")
		if !reflect.DeepEqual(in, got) || (len(inMeta) > 0 && !reflect.DeepEqual(inMeta, meta)) {
			t.Fatalf("%q: forwarded %q changed the params", params, out)
		}
	})
}

// BenchmarkNextHop is the hop step's cost on a routed call's params (a
// small object): "first" as a client sends it, "relayed" with the _meta
// (correlation and count) a router adds — next to the dial and round trip
// the router makes anyway.
func BenchmarkNextHop(b *testing.B) {
	n, err := registry.NewNode(registry.Config{SweepInterval: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	for _, bc := range []struct{ name, params string }{
		{"first", `{"key":"user:42","value":"hello, world","ttl_seconds":60}`},
		{"relayed", `{"key":"user:42","value":"hello, world","ttl_seconds":60,"_meta":{"correlation_id":"c-0f1e2d3c","hops":1}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := []byte(bc.params)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := newServer(n).nextHop(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
