package host

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/capmesh/capmesh/access"
	"github.com/capmesh/capmesh/chp/chprpc"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/wire"
)

// table is an immutable snapshot of what the host answers: the dispatch map
// and the pre-encoded results of capabilities.list and identity.get. A
// change of registrations or listeners builds a new one and swaps it in
// atomically, so a call costs one atomic load and one map lookup, and
// capabilities.list never re-encodes or re-signs on the hot path.
type table struct {
	handlers map[string]jsonrpc.Handler
	mounts   []jsonrpc.Assigner
	// capsList and identity hold json.RawMessage values in interfaces, so
	// returning them to the server allocates nothing.
	capsList any
	identity any
	envelope wire.CapabilitiesList
}

// Assign implements jsonrpc.Assigner: the host's own methods, then each
// mounted assigner in turn.
func (h *Host) Assign(ctx context.Context, name string) jsonrpc.Handler {
	t := h.tab.Load()
	if t == nil {
		t = h.publish()
	}
	if hd, ok := t.handlers[name]; ok {
		return hd
	}
	if h.b.Has(name) {
		// A governed capability registered on the boundary itself (the CHP
		// fixtures, a wrapped server's tools) is callable by name, as a
		// direct call, before any mount (the node's router) could claim it.
		return h.gate(access.OpInvoke, h.guard(chprpc.DirectHandler(h.b)))
	}
	for _, m := range t.mounts {
		if hd := m.Assign(ctx, name); hd != nil {
			return h.gate(mountedOp(m, name), h.guard(hd))
		}
	}
	return nil
}

// Names implements jsonrpc.Lister: every method capabilities.list
// advertises.
func (h *Host) Names() []string {
	t := h.tab.Load()
	if t == nil {
		t = h.publish()
	}
	return slices.Clone(t.envelope.Methods)
}

// Envelope returns the capabilities.list result the host currently
// answers.
func (h *Host) Envelope() wire.CapabilitiesList {
	t := h.tab.Load()
	if t == nil {
		t = h.publish()
	}
	return t.envelope
}

// changedLocked republishes the table if the host is already answering
// calls; before that, the first Assign or Serve builds it. h.mu is held.
func (h *Host) changedLocked() error {
	if h.tab.Load() == nil {
		return nil
	}
	t, err := h.buildLocked()
	if err != nil {
		return err
	}
	h.tab.Store(t)
	return nil
}

// publish builds and installs the table (used on first use).
func (h *Host) publish() *table {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.tab.Load(); t != nil {
		return t
	}
	t, err := h.buildLocked()
	if err != nil {
		// Only encoding could fail here, and these types always encode.
		h.log.Error("host: building the capabilities envelope", "err", err)
		t = &table{handlers: map[string]jsonrpc.Handler{}}
	}
	h.tab.Store(t)
	return t
}

// buildLocked derives everything advertised from the registration table,
// so that methods, groups, costs, dependencies and the signature can never
// drift from what is answered. h.mu is held.
func (h *Host) buildLocked() (*table, error) {
	handlers := h.builtins()
	costs := map[string]wire.CostEstimate{}
	deps := map[string][]string{}
	for name, m := range h.caps {
		handlers[name] = h.gate(access.OpInvoke, h.guard(m.handler))
		if m.cost != nil {
			costs[name] = *m.cost
		}
		if len(m.requires) > 0 {
			deps[name] = slices.Clone(m.requires)
		}
	}
	for name, o := range h.notes {
		if o.cost != nil {
			costs[name] = *o.cost
		}
		if len(o.requires) > 0 {
			deps[name] = slices.Clone(o.requires)
		}
	}
	names := make([]string, 0, len(handlers)+len(h.mountList))
	for name := range handlers {
		if wire.ValidateMethodName(name) == nil { // legacy undotted aliases are answered, not advertised
			names = append(names, name)
		}
	}
	for _, name := range h.mountList {
		if _, own := handlers[name]; !own {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	names = slices.Compact(names)

	groups := wire.GroupByDomain(names)
	if h.info.Description != "" {
		for i := range groups {
			if groups[i].Type == h.info.Domain {
				groups[i].Description = h.info.Description
			}
		}
	}
	consumed := slices.Clone(h.consumed)
	sort.Strings(consumed)
	env := wire.CapabilitiesList{
		Primal:                h.info.Name,
		Version:               h.info.Version,
		Methods:               names,
		ProvidedCapabilities:  groups,
		ConsumedCapabilities:  consumed,
		CostEstimates:         costs,
		OperationDependencies: deps,
		Protocol:              wire.Protocol,
		Transport:             slices.Clone(h.bound),
		TransportSecurity:     h.transportSecurity(),
	}
	sa := wire.SignAnnouncement(h.ikey, env.Primal, env.Version, env.Methods)
	env.SignedAnnouncement = &sa
	capsList, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("host: encoding capabilities.list: %w", err)
	}
	ident, err := json.Marshal(wire.Identity{Primal: h.info.Name, Version: h.info.Version, Domain: h.info.Domain, License: h.info.License})
	if err != nil {
		return nil, fmt.Errorf("host: encoding identity.get: %w", err)
	}
	return &table{
		handlers: handlers,
		mounts:   slices.Clone(h.mounts),
		capsList: json.RawMessage(capsList),
		identity: json.RawMessage(ident),
		envelope: env,
	}, nil
}

// checkDependencies verifies, when the host starts, that every
// prerequisite is a method of this host or one it consumes, so that an
// execution planner reading operation_dependencies can resolve it.
func (h *Host) checkDependencies() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	known := maps.Clone(h.caps)
	reqs := map[string][]string{}
	for name, m := range h.caps {
		reqs[name] = m.requires
	}
	for name, o := range h.notes {
		reqs[name] = o.requires
	}
	for _, name := range slices.Sorted(maps.Keys(reqs)) {
		for _, r := range reqs[name] {
			if _, ok := known[r]; ok || slices.Contains(h.consumed, r) || slices.Contains(h.mountList, r) {
				continue
			}
			return fmt.Errorf("host: %s requires %s, which this host neither provides nor consumes (add it with Consumes)", name, r)
		}
	}
	return nil
}
