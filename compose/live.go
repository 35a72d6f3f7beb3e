package compose

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/wire"
)

// LiveOptions bound the calls that gather live hosts. A nil *LiveOptions
// means the defaults.
type LiveOptions struct {
	// ConnectTimeout bounds each connection (default 1 s: a local socket
	// that is alive accepts at once, but a loaded machine may not schedule
	// the dial promptly); CallTimeout each call (default 2 s).
	ConnectTimeout, CallTimeout time.Duration
}

func (o *LiveOptions) connect() time.Duration {
	if o == nil || o.ConnectTimeout <= 0 {
		return time.Second
	}
	return o.ConnectTimeout
}

func (o *LiveOptions) call() time.Duration {
	if o == nil || o.CallTimeout <= 0 {
		return 2 * time.Second
	}
	return o.CallTimeout
}

// FromEndpoints asks every endpoint, concurrently, for capabilities.list.
// An endpoint that does not answer is a host with Live false (named after
// its socket file), so that what it would have provided shows as
// unavailable rather than silently absent.
func FromEndpoints(ctx context.Context, addrs []endpoint.Address, o *LiveOptions) []*Host {
	out := make([]*Host, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = fromEndpoint(ctx, a, o)
		}()
	}
	wg.Wait()
	return out
}

func fromEndpoint(ctx context.Context, a endpoint.Address, o *LiveOptions) *Host {
	name := strings.TrimSuffix(filepath.Base(a.Path), ".sock")
	if a.Scheme != "unix" {
		name = a.Host
	}
	dead := &Host{Name: name, Endpoint: a.String(), Source: "live", Trusted: true}
	dctx, cancel := context.WithTimeout(ctx, o.connect())
	c, err := endpoint.DialAddress(dctx, a, nil)
	cancel()
	if err != nil {
		return dead
	}
	defer c.Close()
	in, err := wire.Inspect(ctx, c, &wire.InspectOptions{Transport: a.Scheme, CallTimeout: o.call()})
	if err != nil || in.Capabilities == nil {
		return dead
	}
	h := FromCapabilities(name, in.Capabilities)
	h.Live = true
	h.Endpoint, h.Source = a.String(), "live"
	return h
}

// FromRegistry lists the registry's entries (ipc.list, untrusted ones
// included so they can be reported as such), then asks each entry's
// endpoint for its capabilities.list. An entry whose endpoint does not
// answer keeps its registered capabilities but is not live; so does one
// the registry marks "dialable": false (local to another machine), which
// is not dialled, and one whose endpoint is not local-only by its text
// but leads to this machine (a name resolving to loopback:
// endpoint.RefuseLocal), which is not connected to. Under
// endpoint.RefuseLocal — a registry of another machine: the caller puts
// endpoint.RegistryAnswers(ctx, registry address) — every entry is
// dialled under it, and one that is local-only by its text (that
// machine's socket or loopback) is not dialled at all.
func FromRegistry(ctx context.Context, reg jsonrpc.Caller, o *LiveOptions) ([]*Host, error) {
	var list struct {
		Services []struct {
			Name         string   `json:"primal_id"`
			Endpoint     string   `json:"endpoint"`
			Capabilities []string `json:"capabilities"`
			Version      string   `json:"version"`
			Trust        struct {
				Trusted bool `json:"trusted"`
			} `json:"trust"`
			Dialable *bool `json:"dialable"`
		} `json:"services"`
	}
	cctx, cancel := context.WithTimeout(ctx, o.call())
	defer cancel()
	if err := reg.Call(cctx, "ipc.list", map[string]any{"include_untrusted": true}, &list); err != nil {
		return nil, fmt.Errorf("ipc.list: %w", err)
	}
	out := make([]*Host, len(list.Services))
	var wg sync.WaitGroup
	for i, s := range list.Services {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := &Host{Name: s.Name, Endpoint: s.Endpoint, Source: "registry", Version: s.Version, Trusted: s.Trust.Trusted}
			for _, c := range s.Capabilities {
				if strings.Contains(c, ".") {
					h.Methods = union(h.Methods, []string{c})
				} else {
					h.Tokens = union(h.Tokens, []string{c})
				}
			}
			// "dialable": false: local to another machine, where this
			// machine would reach a service of its own
			if a, err := endpoint.Parse(s.Endpoint); err == nil && a.Network() != "" && (s.Dialable == nil || *s.Dialable) && !endpoint.SkipLocal(ctx, s.Endpoint) {
				dctx := ctx
				if !endpoint.LocalOnly(s.Endpoint) {
					// dialable, but nothing says it was registered on this
					// machine: never connect to this machine through a name
					dctx = endpoint.RefuseLocal(ctx)
				}
				if live := fromEndpoint(dctx, a, o); live.Live {
					live.Name, live.Source, live.Trusted = s.Name, "registry", s.Trust.Trusted
					live.Methods = union(live.Methods, h.Methods)
					live.Tokens = union(live.Tokens, h.Tokens)
					h = live
				}
			}
			out[i] = h
		}()
	}
	wg.Wait()
	return out, nil
}
