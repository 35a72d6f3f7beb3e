package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/capmesh/capmesh/chp"
)

// Discover fetches every member's /host and rebuilds the routing table. It
// returns an error naming the members it could not discover; those stay
// out of the table until a later Discover (or the lazy discovery of /host
// and /invoke) reaches them.
func (g *Gateway) Discover(ctx context.Context) error {
	var failed []string
	for _, u := range g.memberURLs() {
		if err := g.discoverOne(ctx, u); err != nil {
			g.log.Warn("CHP gateway: member not discovered", "member", u, "err", err)
			failed = append(failed, u)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("gateway: members not discovered: %v", failed)
	}
	return nil
}

// discoverMissing discovers the members not yet in the routing table that
// were not tried within Config.Rediscover.
func (g *Gateway) discoverMissing(ctx context.Context) {
	for _, m := range g.snapshot() {
		if !m.discovered && g.cfg.Now().Sub(m.tried) >= g.cfg.Rediscover {
			if err := g.discoverOne(ctx, m.url); err != nil {
				g.log.Debug("CHP gateway: member still not discovered", "member", m.url, "err", err)
			}
		}
	}
}

// hostDoc is the part of a member's /host the gateway reads.
type hostDoc struct {
	ID           string                       `json:"id"`
	Capabilities []map[string]json.RawMessage `json:"capabilities"`
}

func (g *Gateway) discoverOne(ctx context.Context, u string) error {
	g.mu.Lock()
	for _, m := range g.members {
		if m.url == u {
			m.tried = g.cfg.Now()
		}
	}
	g.mu.Unlock()
	status, body, err := g.memberDo(ctx, http.MethodGet, u, "/host", nil)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("%s/host: HTTP %d", u, status)
	}
	var doc hostDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("%s/host: %w", u, err)
	}
	if doc.ID == "" {
		return fmt.Errorf("%s/host: descriptor has no id", u)
	}
	caps := doc.Capabilities[:0]
	for _, c := range doc.Capabilities {
		if capString(c, "id") != "" {
			caps = append(caps, c)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range g.members {
		if m.url == u {
			m.hostID, m.caps, m.discovered = doc.ID, caps, true
		}
	}
	return nil
}

// capString reads a string member of a raw capability descriptor.
func capString(c map[string]json.RawMessage, key string) string {
	var s string
	if raw, ok := c[key]; ok {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

// catalog merges the discovered members' capabilities: one entry per
// (id, version), the first owner's descriptor, with "hosts" listing every
// owner's host id and "host_urls" their transport URLs, in member order.
func (g *Gateway) catalog() []map[string]json.RawMessage {
	type owned struct {
		desc  map[string]json.RawMessage
		hosts []string
		urls  []string
	}
	var order []string
	byKey := map[string]*owned{}
	for _, m := range g.snapshot() {
		if !m.discovered {
			continue
		}
		for _, c := range m.caps {
			key := capString(c, "id") + "\x00" + capString(c, "version")
			o := byKey[key]
			if o == nil {
				o = &owned{desc: c}
				byKey[key] = o
				order = append(order, key)
			}
			if !slices.Contains(o.urls, m.url) {
				o.hosts = append(o.hosts, m.hostID)
				o.urls = append(o.urls, m.url)
			}
		}
	}
	out := make([]map[string]json.RawMessage, 0, len(order))
	for _, key := range order {
		o := byKey[key]
		d := make(map[string]json.RawMessage, len(o.desc)+2)
		for k, v := range o.desc {
			d[k] = v
		}
		d["hosts"], _ = json.Marshal(o.hosts)
		d["host_urls"], _ = json.Marshal(o.urls)
		out = append(out, d)
	}
	return out
}

// owners lists the URLs of the discovered members that serve capability
// id, in member order.
func (g *Gateway) owners(id string) []string {
	var out []string
	for _, m := range g.snapshot() {
		for _, c := range m.caps {
			if capString(c, "id") == id {
				out = append(out, m.url)
				break
			}
		}
	}
	return out
}

// serveHost answers GET /host: the gateway's descriptor over the merged
// catalog.
func (g *Gateway) serveHost(w http.ResponseWriter, r *http.Request) {
	g.discoverMissing(r.Context())
	var hosts []string
	for _, m := range g.snapshot() {
		if m.discovered {
			hosts = append(hosts, m.hostID)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id":                 g.cfg.HostID,
		"kind":               "gateway",
		"version":            chp.ProtocolVersion,
		"protocol_version":   chp.ProtocolVersion,
		"supported_versions": []string{"0.1", chp.ProtocolVersion},
		"host_version":       g.cfg.Version,
		"assurance":          "hash-chain",
		"evidence":           map[string]any{"store": g.store.Name(), "append_only": true},
		"metadata":           map[string]any{"members": g.memberURLs(), "member_hosts": hosts},
		"hosts":              hosts,
		"capabilities":       g.catalog(),
	})
}
