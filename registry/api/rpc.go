package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/capmesh/capmesh/access"
	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/descriptor"
	"github.com/capmesh/capmesh/registry/internal/state"
	"github.com/capmesh/capmesh/tracing"
)

type rpcAssigner struct {
	n *server
	m jsonrpc.Map
}

func (a *rpcAssigner) Assign(ctx context.Context, method string) jsonrpc.Handler {
	if h := a.m[method]; h != nil {
		return h
	}
	if routable(method) {
		return jsonrpc.HandlerFunc(func(ctx context.Context, r *jsonrpc.Request) (any, error) {
			res, err := a.n.route(ctx, method, method, r.Params)
			if isNoProvider(err) {
				// Nobody provides the name: to a caller that did not ask for
				// routing, it is simply a method this endpoint does not
				// have. JSON-RPC says -32601; the data keeps the reason.
				var je *jsonrpc.Error
				errors.As(err, &je)
				return nil, &jsonrpc.Error{Code: jsonrpc.MethodNotFound, Message: fmt.Sprintf("Method not found: %q (no live, trusted provider)", method), Data: je.Data}
			}
			return res, err
		})
	}
	return nil
}

// Names lists the node's own methods.
func (a *rpcAssigner) Names() []string {
	out := make([]string, 0, len(a.m))
	for k := range a.m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// resolveFirst answers ipc.resolve with the first of es this node may
// dial, else with the refusal of the last. The caller dials the answer
// itself, out of reach of endpoint.RefuseLocal: an entry not admitted on
// this machine whose host name resolves to it now is refused too.
func (n *server) resolveFirst(ctx context.Context, es []registry.Entry) (any, error) {
	var err error
	for _, e := range es {
		if err = n.MayDial(e); err == nil {
			if !n.mayReachHere(e) && endpoint.ReachesLocal(ctx, e.Endpoint) {
				err = localDestination(e)
				continue
			}
			return resolved(e), nil
		}
	}
	return nil, err
}

// isNoProvider reports whether err is the router's "no live, trusted
// provider" refusal (not a provider's own error passed through).
func isNoProvider(err error) bool {
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != registry.CodeNotFound {
		return false
	}
	var d struct {
		Code string `json:"code"`
	}
	return json.Unmarshal(je.Data, &d) == nil && d.Code == registry.CodeWordNoProvider
}

// routable: domain.operation with non-empty parts, not one of the
// reserved namespaces the node answers itself.
func routable(m string) bool {
	i := strings.IndexByte(m, '.')
	if i <= 0 || i == len(m)-1 {
		return false
	}
	switch m[:i] {
	case "ipc", "registry", "rpc", "health", "capabilities", "identity", "lifecycle":
		return false
	}
	return true
}

func handler[P any](f func(ctx context.Context, peer jsonrpc.Peer, p P) (any, error)) jsonrpc.Handler {
	return jsonrpc.HandlerFunc(func(ctx context.Context, r *jsonrpc.Request) (any, error) {
		var p P
		if len(r.Params) > 0 && string(r.Params) != "null" {
			if err := r.UnmarshalParams(&p); err != nil {
				return nil, err
			}
		}
		peer, _ := jsonrpc.PeerFromContext(ctx)
		res, err := f(ctx, peer, p)
		return res, registry.RPCError(err)
	})
}

type nameParams struct {
	PrimalID string `json:"primal_id"`
	Name     string `json:"name"`
	Primal   string `json:"primal"`
	// Token is the registration token ipc.register returned (heartbeat,
	// unregister, re-register).
	Token string `json:"registration_token"`
}

func (p nameParams) name() string {
	for _, s := range []string{p.PrimalID, p.Name, p.Primal} {
		if s != "" {
			return s
		}
	}
	return ""
}

type registerParams struct {
	nameParams
	Capabilities []string `json:"capabilities"`
	// Endpoint is a string or Songbird's tagged object
	// ({"transport":"uds","path":…}); see localEndpoint.
	Endpoint   json.RawMessage `json:"endpoint"`
	SocketPath string          `json:"socket_path"`
	Socket     string          `json:"socket"`
	Version    string          `json:"version"`
	Descriptor json.RawMessage `json:"descriptor"`
}

// providerView is the Songbird ProviderInfo shape plus capmesh's fields.
type providerView struct {
	PrimalID        string           `json:"primal_id"`
	VirtualEndpoint string           `json:"virtual_endpoint"`
	NativeEndpoint  string           `json:"native_endpoint"`
	Socket          string           `json:"socket,omitempty"`
	Capabilities    []string         `json:"capabilities"`
	Endpoint        string           `json:"endpoint"`
	Key             string           `json:"key"`
	Source          string           `json:"source"`
	RegisteredAt    time.Time        `json:"registered_at"`
	ExpiresAt       time.Time        `json:"expires_at"`
	Trust           registry.Verdict `json:"trust"`
	// Dialable is false for an entry this node may not dial (Node.MayDial:
	// local to another machine), absent otherwise; an answer's reader must
	// not connect to such an entry either (additive: older readers ignore
	// it, older nodes never send it).
	Dialable   *bool `json:"dialable,omitempty"`
	Descriptor any   `json:"descriptor,omitempty"`
}

// undialable is the Dialable of an entry this node may not dial.
var undialable = new(bool)

// view is toProvider for an answer of this node: marked Dialable false
// when the node may not dial e.
func (n *server) view(e registry.Entry) providerView {
	p := toProvider(e)
	if n.MayDial(e) != nil {
		p.Dialable = undialable
	}
	return p
}

func toProvider(e registry.Entry) providerView {
	p := providerView{PrimalID: e.Name, VirtualEndpoint: "/primal/" + e.Name, NativeEndpoint: e.Endpoint, Capabilities: e.Capabilities,
		Endpoint: e.Endpoint, Key: e.Key, Source: e.Source, RegisteredAt: e.RegisteredAt, ExpiresAt: e.ExpiresAt, Trust: e.Trust}
	if p.Capabilities == nil {
		p.Capabilities = []string{}
	}
	if strings.HasPrefix(e.Endpoint, "unix://") {
		p.Socket = strings.TrimPrefix(e.Endpoint, "unix://")
	}
	if len(e.Descriptor) > 0 {
		p.Descriptor = e.Descriptor
	}
	return p
}

func (n *server) requireOperator(peer jsonrpc.Peer) error {
	if peer.Transport != "unix" || !peer.HasCred || peer.UID != *n.cfg.UID {
		return registry.Refuse(registry.CodeWordForeignUser, "operator methods are accepted only over the node's Unix socket from its own user")
	}
	return nil
}

// methods is the node's method table, by group.
func (n *server) methods() jsonrpc.Map {
	m := jsonrpc.Map{}
	for _, part := range []jsonrpc.Map{n.discoveryMethods(), n.registrationMethods(), n.operatorMethods()} {
		maps.Copy(m, part)
	}
	return m
}

// discoveryMethods are the reads: discover (and its aliases), resolve,
// list and watch.
func (n *server) discoveryMethods() jsonrpc.Map {
	discover := handler(func(ctx context.Context, _ jsonrpc.Peer, p struct {
		Capability       string `json:"capability"`
		IncludeUntrusted bool   `json:"include_untrusted"`
		Limit            int    `json:"limit"`
	}) (any, error) {
		if p.Capability == "" {
			return nil, registry.Refuse(registry.CodeWordInvalidParams, "capability is required")
		}
		// {"capability","providers","revision"}, the keys in encoding/json's
		// map order; providers encoded straight from the index.
		b := append(make([]byte, 0, 4096), `{"capability":`...)
		b = appendJSONString(b, p.Capability)
		b = append(b, `,"providers":[`...)
		first := true
		n.FindFunc(p.Capability, registry.FindOptions{IncludeUntrusted: p.IncludeUntrusted, Limit: p.Limit}, func(e registry.Entry) bool {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendProvider(b, n.view(e))
			return true
		})
		b = strconv.AppendUint(append(b, `],"revision":`...), n.Version(), 10)
		return json.RawMessage(append(b, '}')), nil
	})
	resolve := handler(func(ctx context.Context, _ jsonrpc.Peer, p struct {
		nameParams
		Capability string `json:"capability"`
	}) (any, error) {
		// The caller connects to what it resolves: never to an endpoint
		// local to another machine (Node.MayDial), which it would reach
		// on its own.
		if p.Capability != "" {
			es := n.Find(p.Capability, registry.FindOptions{})
			if e, ok := n.ResolveName(p.Capability); ok {
				es = append(es, e)
			}
			if len(es) == 0 {
				return nil, registry.Refuse(registry.CodeWordNoProvider, "no live, trusted provider for capability %q", p.Capability)
			}
			return n.resolveFirst(ctx, es)
		}
		if p.name() == "" {
			return nil, registry.Refuse(registry.CodeWordInvalidParams, "ipc.resolve requires primal_id (or name) or capability")
		}
		e, ok := n.ResolveName(p.name())
		if !ok {
			return nil, registry.Refuse(registry.CodeWordNotRegistered, "primal %q is not registered", p.name())
		}
		return n.resolveFirst(ctx, []registry.Entry{e})
	})
	return jsonrpc.Map{
		"ipc.resolve":        resolve,
		"capability.resolve": resolve, // Songbird
		"ipc.discover":       discover,
		// ipc.find_capability answers "services" too: NestGate's client
		// reads that key, capmesh's and Songbird's read "providers".
		"ipc.find_capability":              withServices(discover),
		"capability.discover":              discover,
		"discovery.find_by_capability":     discover, // Songbird aliases of ipc.discover
		"net.discovery.find_by_capability": discover,
		"discovery.by_capability":          discover,
		"ipc.list": handler(func(ctx context.Context, _ jsonrpc.Peer, p struct {
			IncludeUntrusted bool `json:"include_untrusted"`
		}) (any, error) {
			es := n.List(p.IncludeUntrusted)
			b := append(make([]byte, 0, 64+len(es)*900), `{"revision":`...)
			b = strconv.AppendUint(b, n.Version(), 10)
			b = appendProviders(append(b, `,"services":`...), es, n.view)
			return json.RawMessage(append(b, '}')), nil
		}),
		"ipc.watch": handler(func(ctx context.Context, _ jsonrpc.Peer, p struct {
			SinceRevision uint64   `json:"since_revision"`
			Capabilities  []string `json:"capabilities"`
			WaitMS        int      `json:"wait_ms"`
		}) (any, error) {
			wait := time.Duration(p.WaitMS) * time.Millisecond
			if wait > 60*time.Second {
				wait = 60 * time.Second
			}
			rev, evs, err := n.Watch(ctx, p.SinceRevision, p.Capabilities, wait)
			if err != nil {
				return nil, err
			}
			if evs == nil {
				evs = []registry.Event{}
			}
			return map[string]any{"revision": rev, "events": evs}, nil
		}),
	}
}

// registrationMethods are a provider's writes and the router's entry:
// register, heartbeat, unregister and capability.call.
func (n *server) registrationMethods() jsonrpc.Map {
	return jsonrpc.Map{
		"ipc.register": handler(func(ctx context.Context, peer jsonrpc.Peer, p registerParams) (any, error) {
			var e registry.Entry
			var token string
			var err error
			if len(p.Descriptor) > 0 && string(p.Descriptor) != "null" {
				var d *descriptor.Descriptor
				if d, err = descriptor.Parse(p.Descriptor); err != nil {
					return nil, err
				}
				e, err = n.Register(ctx, d)
			} else {
				ep, eperr := localEndpoint(p)
				if eperr != nil {
					return nil, eperr
				}
				e, token, err = n.RegisterLocal(ctx, peer, registry.LocalRegistration{Name: p.name(), Capabilities: p.Capabilities, Endpoint: ep, Version: p.Version, Token: p.Token})
			}
			if err != nil {
				return nil, err
			}
			res := map[string]any{
				"virtual_endpoint": "/primal/" + e.Name, "registered_at": e.RegisteredAt.Format(time.RFC3339Nano),
				"expires_at": e.ExpiresAt.Format(time.RFC3339Nano), "ttl_seconds": int(e.ExpiresAt.Sub(n.cfg.Now()).Seconds()),
				"key": e.Key, "endpoint": e.Endpoint, "source": e.Source, "trust": e.Trust, "registered": true,
			}
			if token != "" {
				res["registration_token"] = token
			}
			return res, nil
		}),
		"ipc.heartbeat": handler(func(ctx context.Context, peer jsonrpc.Peer, p nameParams) (any, error) {
			exp, err := n.Heartbeat(ctx, peer, p.name(), p.Token)
			if err != nil {
				return nil, err
			}
			return map[string]any{"acknowledged": true, "timestamp": n.cfg.Now().UTC().Format(time.RFC3339Nano), "expires_at": exp.Format(time.RFC3339Nano)}, nil
		}),
		"ipc.unregister": handler(func(ctx context.Context, peer jsonrpc.Peer, p nameParams) (any, error) {
			if err := n.Unregister(ctx, peer, p.name(), p.Token); err != nil {
				return nil, err
			}
			return map[string]any{"unregistered": true}, nil
		}),
		"capability.call": jsonrpc.HandlerFunc(func(ctx context.Context, r *jsonrpc.Request) (any, error) {
			var p struct {
				Capability string          `json:"capability"`
				Operation  string          `json:"operation"`
				Method     string          `json:"method"`
				Args       json.RawMessage `json:"args"`
				Params     json.RawMessage `json:"params"`
				Meta       json.RawMessage `json:"_meta"`
			}
			if err := r.UnmarshalParams(&p); err != nil {
				return nil, err
			}
			if p.Capability == "" {
				return nil, registry.RPCError(registry.Refuse(registry.CodeWordInvalidParams, "capability is required"))
			}
			method := p.Capability
			if op := nonEmpty(p.Operation, p.Method); op != "" {
				method = p.Capability + "." + op
			}
			params := p.Args
			if len(params) == 0 {
				params = p.Params
			}
			params = withMeta(params, p.Meta)
			return n.route(ctx, p.Capability, method, params)
		}),
	}
}

// operatorMethods are the registry.* methods: enrolment, invites,
// revocation (the operator's alone) and the trust state's reads.
func (n *server) operatorMethods() jsonrpc.Map {
	return jsonrpc.Map{
		"registry.enroll": handler(func(ctx context.Context, peer jsonrpc.Peer, p struct {
			NodePublicKey string   `json:"node_public_key"`
			Roles         []string `json:"roles"`
			ValidityHours *int64   `json:"validity_hours"`
		}) (any, error) {
			if err := n.requireOperator(peer); err != nil {
				return nil, err
			}
			validity, err := hoursParam("validity_hours", p.ValidityHours, 168, registry.MaxValidityHours)
			if err != nil {
				return nil, err
			}
			c, err := n.Enroll(ctx, p.NodePublicKey, p.Roles, validity)
			if err != nil {
				return nil, err
			}
			raw, _ := c.MarshalJSON()
			return json.RawMessage(raw), nil
		}),
		"registry.invite": handler(func(ctx context.Context, peer jsonrpc.Peer, p struct {
			Roles            []string `json:"roles"`
			MaxValidityHours *int64   `json:"max_validity_hours"`
			TokenExpiryHours *int64   `json:"token_expiry_hours"`
		}) (any, error) {
			if err := n.requireOperator(peer); err != nil {
				return nil, err
			}
			maxV, err := hoursParam("max_validity_hours", p.MaxValidityHours, 168, registry.MaxValidityHours)
			if err != nil {
				return nil, err
			}
			ttl, err := hoursParam("token_expiry_hours", p.TokenExpiryHours, 24, registry.MaxTokenExpiryHours)
			if err != nil {
				return nil, err
			}
			tok, exp, err := n.Invite(ctx, p.Roles, maxV, ttl)
			if err != nil {
				return nil, err
			}
			return map[string]any{"token_id": tok, "expires_at": exp.UTC().Format(time.RFC3339)}, nil
		}),
		"registry.revoke": handler(func(ctx context.Context, peer jsonrpc.Peer, p struct {
			CertID        string `json:"cert_id"`
			NodePublicKey string `json:"node_public_key"`
			Reason        string `json:"reason"`
		}) (any, error) {
			if err := n.requireOperator(peer); err != nil {
				return nil, err
			}
			return n.Revoke(ctx, p.CertID, p.NodePublicKey, p.Reason)
		}),
		"registry.certificates": handler(func(ctx context.Context, _ jsonrpc.Peer, p struct {
			NodePublicKey string `json:"node_public_key"`
		}) (any, error) {
			return map[string]any{"certificates": n.Certificates(p.NodePublicKey)}, nil
		}),
		"registry.crl": handler(func(ctx context.Context, _ jsonrpc.Peer, _ struct{}) (any, error) {
			c, err := n.CurrentCRL(ctx)
			if err != nil {
				return nil, err
			}
			raw, _ := c.MarshalJSON()
			return json.RawMessage(raw), nil
		}),
		"registry.info": handler(func(ctx context.Context, _ jsonrpc.Peer, _ struct{}) (any, error) {
			return map[string]any{"network": n.cfg.Network, "authority_public_key": n.AuthorityPublicKey(), "authority_key_id": n.cfg.AuthorityKeyID,
				"revision": n.Version(), "local_ttl_seconds": int(n.cfg.LocalTTL / time.Second)}, nil
		}),
	}
}

// withMeta adds the caller's _meta (correlation) to an object params when
// the params do not carry one already.
func withMeta(params, meta json.RawMessage) json.RawMessage {
	if len(meta) == 0 || len(params) == 0 {
		return params
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(params, &obj) != nil || obj == nil {
		return params
	}
	if _, ok := obj["_meta"]; ok {
		return params
	}
	obj["_meta"] = meta
	b, err := json.Marshal(obj)
	if err != nil {
		return params
	}
	return b
}

// route forwards method with params to a live, trusted provider of
// capability (the exact tag first, then the method's domain), trying the
// next provider when one cannot be reached. The provider's result or
// JSON-RPC error is returned unchanged.
func (n *server) route(ctx context.Context, capability, method string, params json.RawMessage) (any, error) {
	// The caller's trace context, for the log lines of the call (and the
	// parent of the route span): correlation only, never verified.
	if sc, ok := tracing.FromMeta(params); ok {
		ctx = tracing.ContextWith(ctx, sc)
	}
	if t := n.cfg.Tracer; t != nil {
		return n.routeTraced(ctx, t, capability, method, params)
	}
	if n.cfg.Observer == nil && !n.cfg.Logger.Enabled(ctx, slog.LevelDebug) {
		res, _, _, err := n.routeCall(ctx, capability, method, params)
		return res, err
	}
	res, hops, outcome, err := n.routeCall(ctx, capability, method, params)
	n.routed(ctx, method, outcome, hops)
	return res, err
}

// routeTraced is route in a span of its own ("capmesh.route"), a child
// of the caller's span when ctx carries one; the provider receives the
// route span's traceparent instead of the caller's.
func (n *server) routeTraced(ctx context.Context, t tracing.Tracer, capability, method string, params json.RawMessage) (any, error) {
	ctx, sp := t.Start(ctx, "capmesh.route", tracing.KindServer)
	if p, err := tracing.WithMeta(params, sp.SpanContext()); err == nil {
		params = p // params that are not an object: nextHopN refuses them
	}
	res, hops, outcome, err := n.routeCall(ctx, capability, method, params)
	n.routed(ctx, method, outcome, hops)
	sp.SetAttributes(slog.String("rpc.system", "jsonrpc"), slog.String("rpc.method", method),
		slog.String("capmesh.capability", capability), slog.String("capmesh.route.outcome", outcome), slog.Int64("capmesh.route.hops", hops))
	sp.End(err)
	return res, err
}

// routed reports a routed call to the Observer and the debug log.
func (n *server) routed(ctx context.Context, method, outcome string, hops int64) {
	if o := n.cfg.Observer; o != nil {
		o.OnRoute(outcome, int(hops))
	}
	n.cfg.Logger.DebugContext(ctx, "registry: routed a call", "method", method, "outcome", outcome, "hops", hops)
}

// routeCall is route, also returning the hop count the forwarded call
// carried (0 when it was not forwarded) and its Route* outcome.
func (n *server) routeCall(ctx context.Context, capability, method string, params json.RawMessage) (any, int64, string, error) {
	cands := n.Find(capability, registry.FindOptions{})
	if len(cands) == 0 && capability == method {
		if i := strings.IndexByte(method, '.'); i > 0 {
			cands = n.Find(method[:i], registry.FindOptions{})
		}
	}
	if len(cands) == 0 {
		return n.routeDiscovered(ctx, capability, method, params)
	}
	params, hops, err := n.nextHopN(params) // loop protection: _meta.hops
	if err != nil {
		return nil, 0, registry.RouteRefused, registry.RPCError(err)
	}
	// The provider sees this node as its peer: say who the caller really is.
	params, err = access.Forward(ctx, params, n.cfg.Network)
	if err != nil {
		return nil, 0, registry.RouteRefused, err
	}
	rl := newRelay(ctx, n.cfg.Logger) // the provider's notifications, to a stream caller
	defer rl.close()
	var lastErr, elsewhere error
	dialled := false
	for _, e := range cands {
		if !routableEndpoint(e.Endpoint) || n.IsSelf(e.Endpoint) {
			lastErr = fmt.Errorf("%s: endpoint %s is not a JSON-RPC endpoint of another host", e.Name, e.Endpoint)
			continue
		}
		if err := n.MayDial(e); err != nil {
			lastErr, elsewhere = err, err // local to another machine: listed, never dialled here
			continue
		}
		c, err := n.cfg.Dial(n.entryDialContext(rl.dialContext(ctx), e), e.Endpoint)
		if errors.Is(err, endpoint.ErrLocalDestination) {
			lastErr, elsewhere = localDestination(e), localDestination(e) // it resolved to this machine
			continue
		}
		if err != nil {
			dialled = true
			n.DropIfGone(ctx, e, err) // the host stopped without unregistering
			lastErr = fmt.Errorf("%s (%s): %w", e.Name, e.Endpoint, err)
			continue
		}
		res, err := callProvider(ctx, c, rl, method, params)
		if err == nil {
			return res, hops, registry.RouteOK, nil
		}
		if errors.Is(err, endpoint.ErrLocalDestination) {
			// The HTTP bridge connects only when called: the same refusal.
			lastErr, elsewhere = localDestination(e), localDestination(e)
			continue
		}
		dialled = true
		if _, ok := jsonrpc.ErrorCode(err); ok {
			return nil, hops, registry.RouteProviderError, err // the provider's own error, code preserved
		}
		lastErr = fmt.Errorf("%s (%s): %w", e.Name, e.Endpoint, err)
		if rl.started() {
			break // the caller saw this provider begin: another would repeat it
		}
	}
	if !dialled && elsewhere != nil {
		return nil, hops, registry.RouteRefused, registry.RPCError(elsewhere)
	}
	return nil, hops, registry.RouteUnreachable, jsonrpc.Errorf(registry.CodeUnavailable, "no provider of %q could be reached: %v", capability, lastErr).WithData(map[string]any{"code": "provider_unreachable"})
}

// entryDialContext is ctx for dialling e's endpoint: under
// endpoint.RefuseLocal unless e was admitted on this machine
// (state.MayReachHere), so that whatever e's endpoint names, the
// connection never reaches this machine itself for a registration made
// elsewhere.
func (n *server) entryDialContext(ctx context.Context, e registry.Entry) context.Context {
	if n.mayReachHere(e) {
		return ctx
	}
	return endpoint.RefuseLocal(ctx)
}

// mayReachHere reports whether e was admitted on this node's machine
// (state.MayReachHere).
func (n *server) mayReachHere(e registry.Entry) bool {
	_, shared := n.cfg.Store.(registry.SharedStore)
	return state.MayReachHere(e, n.cfg.Machine, shared)
}

// localDestination is the refusal of a dial that reached this machine
// although e was not registered on it (endpoint.ErrLocalDestination).
func localDestination(e registry.Entry) error {
	return registry.Refuse(registry.CodeWordLocalEndpoint, "%s: endpoint %s leads to the machine it is dialled from, and was not registered on this node's machine: call it through a node of the machine it was registered on", e.Name, e.Endpoint)
}

// callProvider makes the routed call on c and closes c. The relay, when
// there is one, is closed as soon as the answer (a result or the
// provider's error) is in, before it is returned to the caller: nothing
// the provider sends afterwards is relayed. Without an answer it stays
// open for the next provider; c is closed by then.
func callProvider(ctx context.Context, c jsonrpc.Caller, rl *relay, method string, params json.RawMessage) (json.RawMessage, error) {
	var res json.RawMessage
	var p any
	if len(params) > 0 {
		p = params
	}
	err := c.Call(ctx, method, p, &res)
	if _, answered := jsonrpc.ErrorCode(err); err == nil || answered {
		rl.close()
	}
	c.Close()
	return res, err
}

func routableEndpoint(ep string) bool {
	for _, p := range []string{"unix://", "tcp://", "http://", "https://"} {
		if strings.HasPrefix(ep, p) {
			return true
		}
	}
	return false
}

// routeDiscovered serves a call that no registered provider takes, when
// Config.Discover is set, through the Primal IPC Protocol's discovery
// limited to what is the node's user's alone: the environment's
// <DOMAIN>_SOCKET, the method's primal and domain sockets and the other
// sockets of the node's own socket directory (0700; see
// endpoint.Discover) — never a registry (the node is one), never TCP, and
// never the node itself. The provider's answer or error is returned as
// from a registered one.
func (n *server) routeDiscovered(ctx context.Context, capability, method string, params json.RawMessage) (any, int64, string, error) {
	noProvider := registry.RPCError(registry.Refuse(registry.CodeWordNoProvider, "no live, trusted provider for %q", capability))
	if !n.cfg.Discover || capability != method {
		return nil, 0, registry.RouteNoProvider, noProvider
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	probe, found, err := endpoint.Discover(dctx, endpoint.Query{Method: method, NoRegistry: true, NoTCP: true, ProbeTimeout: time.Second})
	cancel()
	if err != nil {
		return nil, 0, registry.RouteNoProvider, noProvider
	}
	probe.Close() // the call goes through Config.Dial, as a registered provider's does
	if n.IsSelf(found.Addr.String()) {
		return nil, 0, registry.RouteNoProvider, noProvider
	}
	params, hops, err := n.nextHopN(params)
	if err != nil {
		return nil, 0, registry.RouteRefused, registry.RPCError(err)
	}
	if params, err = access.Forward(ctx, params, n.cfg.Network); err != nil {
		return nil, 0, registry.RouteRefused, err
	}
	rl := newRelay(ctx, n.cfg.Logger)
	defer rl.close()
	var res json.RawMessage
	c, err := n.cfg.Dial(rl.dialContext(ctx), found.Addr.String())
	if err == nil {
		res, err = callProvider(ctx, c, rl, method, params)
	}
	if err == nil {
		return res, hops, registry.RouteOK, nil
	}
	if _, ok := jsonrpc.ErrorCode(err); ok {
		return nil, hops, registry.RouteProviderError, err
	}
	return nil, hops, registry.RouteUnreachable, jsonrpc.Errorf(registry.CodeUnavailable, "the provider of %q found at %s (%s) could not be reached: %v", capability, found.Addr, found.Via, err).WithData(map[string]any{"code": "provider_unreachable"})
}
