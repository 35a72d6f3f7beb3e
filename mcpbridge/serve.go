package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/jsonrpc/jhttp"
)

// Capability is one capmesh capability offered as an MCP tool.
type Capability struct {
	// Descriptor is the capability's CHP descriptor (its id is the method).
	Descriptor chp.CapabilityDescriptor
	// Provider names the host that provides it.
	Provider string
}

// Provider is one entry of a node's ipc.list.
type Provider struct {
	PrimalID string `json:"primal_id"`
	Endpoint string `json:"endpoint"`
	Trust    struct {
		Trusted bool   `json:"trusted"`
		Reason  string `json:"reason"`
	} `json:"trust"`
	// Dialable is false when the node may not dial the provider (local to
	// another machine: here it would reach this machine's own service);
	// nil when the node does not say.
	Dialable *bool `json:"dialable,omitempty"`
}

// DialFunc connects to a provider's endpoint ("unix:///path", a bare socket
// path, "tcp://host:port", or an http(s) URL of a JSON-RPC bridge).
type DialFunc func(ctx context.Context, endpoint string) (jsonrpc.Caller, error)

// Dial is the default DialFunc. An endpoint that is local-only by its
// text (a Unix socket, loopback) is dialled as before, unless ctx carries
// endpoint.RefuseLocal; any other goes through the endpoint package's
// guarded dialler under endpoint.RefuseLocal, as compose dials it: nothing
// in a node's list says it was registered on this machine, so a name
// resolving here is not connected to, and an http(s) provider is called
// without a proxy and never through a redirect.
func Dial(ctx context.Context, ep string) (jsonrpc.Caller, error) {
	n, err := endpoint.Normalize(ep)
	if err != nil {
		return nil, fmt.Errorf("mcpbridge: endpoint %q: want unix://, tcp://, http(s):// or a socket path: %w", ep, err)
	}
	if !endpoint.LocalOnly(n) || endpoint.LocalRefused(ctx) {
		return endpoint.Dial(endpoint.RefuseLocal(ctx), n)
	}
	switch {
	case strings.HasPrefix(ep, "http://"), strings.HasPrefix(ep, "https://"):
		return jhttp.NewClient(ep, nil), nil
	case strings.HasPrefix(ep, "tcp://"):
		return jsonrpc.Dial(ctx, "tcp", strings.TrimPrefix(ep, "tcp://"), nil)
	case strings.HasPrefix(ep, "unix://"):
		u, err := url.Parse(ep)
		if err != nil {
			return nil, err
		}
		return jsonrpc.Dial(ctx, "unix", u.Path, nil)
	case strings.HasPrefix(ep, "/"):
		return jsonrpc.Dial(ctx, "unix", ep, nil)
	}
	return nil, fmt.Errorf("mcpbridge: endpoint %q: want unix://, tcp://, http(s):// or a socket path", ep)
}

// NodeCapabilities returns the capabilities of every provider a node trusts:
// ipc.list (which leaves untrusted providers out), every entry whose verdict
// is not trusted or that the node marks "dialable": false dropped (and
// one whose endpoint's name leads to this machine: nameToHere), then
// chp.describe of each provider's endpoint. A provider that cannot be reached or described is skipped and
// logged. A method two providers offer is listed once (the node routes it).
// The result is in method order.
//
// A node of another machine (an Upstream over TCP to an address that is
// not this machine's; for another Caller, ctx under
// endpoint.RegistryAnswers of its address) lists that machine's
// services: its providers are dialled under endpoint.RefuseLocal, and
// one that is local-only by its text (that machine's socket or loopback)
// is left out without dialling.
func NodeCapabilities(ctx context.Context, node jsonrpc.Caller, dial DialFunc, log *slog.Logger) ([]Capability, error) {
	if dial == nil {
		dial = Dial
	}
	if u, ok := node.(*Upstream); ok && u.network != "unix" {
		ctx = endpoint.RegistryAnswers(ctx, u.network+"://"+u.addr)
	}
	if log == nil {
		log = slog.Default()
	}
	var list struct {
		Services []Provider `json:"services"`
	}
	if err := node.Call(ctx, "ipc.list", map[string]any{}, &list); err != nil {
		return nil, fmt.Errorf("mcpbridge: ipc.list: %w", err)
	}
	seen := map[string]bool{}
	var out []Capability
	for _, p := range list.Services {
		if !p.Trust.Trusted {
			log.Warn("mcpbridge: skipping an untrusted provider", "provider", p.PrimalID, "reason", p.Trust.Reason)
			continue
		}
		if p.Dialable != nil && !*p.Dialable || endpoint.SkipLocal(ctx, p.Endpoint) || nameToHere(ctx, p.Endpoint) {
			log.Warn("mcpbridge: skipping a provider local to another machine", "provider", p.PrimalID, "endpoint", p.Endpoint)
			continue
		}
		c, err := dial(ctx, p.Endpoint)
		if err != nil {
			log.Warn("mcpbridge: provider unreachable", "provider", p.PrimalID, "err", err)
			continue
		}
		caps, err := HostCapabilities(ctx, c, p.PrimalID)
		c.Close()
		if err != nil {
			log.Warn("mcpbridge: provider not described", "provider", p.PrimalID, "err", err)
			continue
		}
		for _, cp := range caps {
			if !seen[cp.Descriptor.ID] {
				seen[cp.Descriptor.ID] = true
				out = append(out, cp)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Descriptor.ID < out[j].Descriptor.ID })
	return out, nil
}

// nameToHere reports whether ep is not local-only by its text but leads
// to this machine (a name resolving to loopback): nothing in ipc.list
// says it was registered here, so the bridge does not connect to it.
func nameToHere(ctx context.Context, ep string) bool {
	if n, err := endpoint.Normalize(ep); err == nil {
		ep = n
	}
	return !endpoint.LocalOnly(ep) && endpoint.ReachesLocal(ctx, ep)
}

// HostCapabilities returns the enabled capabilities of one host, from its
// chp.describe, in method order.
func HostCapabilities(ctx context.Context, c jsonrpc.Caller, provider string) ([]Capability, error) {
	var d chp.HostDescriptor
	if err := c.Call(ctx, "chp.describe", nil, &d); err != nil {
		return nil, fmt.Errorf("mcpbridge: chp.describe: %w", err)
	}
	if provider == "" {
		provider = d.ID
	}
	var out []Capability
	for _, cd := range d.Capabilities {
		if cd.Disabled() || cd.ID == "" {
			continue
		}
		out = append(out, Capability{Descriptor: cd, Provider: provider})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Descriptor.ID < out[j].Descriptor.ID })
	return out, nil
}

// Upstream is the connection an MCP server's calls go through: to a node,
// which routes each method to a trusted provider, or to one host. It dials
// lazily, redials after the connection is lost, and delivers the
// mcp.progress notifications of a call to that call.
type Upstream struct {
	network, addr string

	mu       sync.Mutex
	c        *jsonrpc.Client
	progress sync.Map // own token (string) → func(progressParams)
}

// NewUpstream returns an Upstream for a stream endpoint: network "unix" with
// a socket path, or "tcp" with host:port.
func NewUpstream(network, addr string) *Upstream {
	return &Upstream{network: network, addr: addr}
}

// client returns the live connection, dialling one when needed.
func (u *Upstream) client(ctx context.Context) (*jsonrpc.Client, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.c != nil {
		select {
		case <-u.c.Done():
			u.c = nil
		default:
			return u.c, nil
		}
	}
	c, err := jsonrpc.Dial(ctx, u.network, u.addr, &jsonrpc.ClientOptions{OnNotify: u.onNotify})
	if err != nil {
		return nil, err
	}
	u.c = c
	return c, nil
}

func (u *Upstream) onNotify(method string, params json.RawMessage) {
	if method != NotifyProgress {
		return
	}
	var p progressParams
	if json.Unmarshal(params, &p) != nil {
		return
	}
	var tok string
	if json.Unmarshal(p.ProgressToken, &tok) != nil {
		return
	}
	if f, ok := u.progress.Load(tok); ok {
		f.(func(progressParams))(p)
	}
}

// Call implements jsonrpc.Caller.
func (u *Upstream) Call(ctx context.Context, method string, params, result any) error {
	c, err := u.client(ctx)
	if err != nil {
		return err
	}
	return c.Call(ctx, method, params, result)
}

// Notify implements jsonrpc.Caller.
func (u *Upstream) Notify(ctx context.Context, method string, params any) error {
	c, err := u.client(ctx)
	if err != nil {
		return err
	}
	return c.Notify(ctx, method, params)
}

// Close closes the connection.
func (u *Upstream) Close() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.c == nil {
		return nil
	}
	err := u.c.Close()
	u.c = nil
	return err
}

// ServeConfig configures NewServer.
type ServeConfig struct {
	// Implementation names the MCP server. Default capmesh.
	Implementation *mcp.Implementation
	// Discover, when set, is asked again before every tools/list, and the
	// tools follow what it returns: a capability that appeared is added, one
	// that is gone — or whose provider lost the node's trust — is removed,
	// one whose descriptor changed is replaced. When it fails the tools stay
	// as they were.
	Discover func(ctx context.Context) ([]Capability, error)
	// Logger receives discovery failures. Default slog.Default().
	Logger *slog.Logger
}

// NewServer returns an MCP server with one tool per capability, named by
// the capability's method, described and with the input schema of its
// descriptor (an object schema; {"type":"object"} when it has none). A
// tools/call is sent to up as the method with the tool's arguments: the
// callee's CHP boundary governs it. Success is returned as the capability's
// result — as is when it is an MCP tool result (a wrapped MCP server's),
// else as JSON text with the value as structured content. A denial, a
// failure or an unreachable provider is an MCP tool error whose structured
// content has the code, the message and, when the callee ran its boundary,
// the outcome, denial, correlation and evidence ids. A call with a progress
// token gets the callee's progress.
func NewServer(caps []Capability, up *Upstream, cfg *ServeConfig) *mcp.Server {
	if cfg == nil {
		cfg = &ServeConfig{}
	}
	impl := cfg.Implementation
	if impl == nil {
		impl = &mcp.Implementation{Name: "capmesh", Version: "0.1.0"}
	}
	s := mcp.NewServer(impl, &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}})
	cat := &catalog{s: s, up: up, have: map[string]string{}}
	cat.sync(caps)
	if cfg.Discover != nil {
		log := cfg.Logger
		if log == nil {
			log = slog.Default()
		}
		s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "tools/list" {
					if caps, err := cfg.Discover(ctx); err != nil {
						log.Warn("mcpbridge: rediscovering capabilities; the tools stay as they were", "err", err)
					} else {
						cat.sync(caps)
					}
				}
				return next(ctx, method, req)
			}
		})
	}
	return s
}

// catalog keeps an MCP server's tools equal to a set of capabilities.
type catalog struct {
	s    *mcp.Server
	up   *Upstream
	mu   sync.Mutex
	have map[string]string // method → its descriptor's JSON
}

// sync adds, replaces and removes tools so that they are caps.
func (c *catalog) sync(caps []Capability) {
	c.mu.Lock()
	defer c.mu.Unlock()
	want := map[string]bool{}
	for _, cp := range caps {
		id := cp.Descriptor.ID
		if want[id] {
			continue
		}
		want[id] = true
		raw, _ := json.Marshal(cp.Descriptor)
		if c.have[id] == string(raw) {
			continue
		}
		c.s.AddTool(toolOf(cp), forward(c.up, id))
		c.have[id] = string(raw)
	}
	var gone []string
	for id := range c.have {
		if !want[id] {
			gone = append(gone, id)
			delete(c.have, id)
		}
	}
	if len(gone) > 0 {
		c.s.RemoveTools(gone...)
	}
}

// toolOf is the MCP tool definition of a capability.
func toolOf(c Capability) *mcp.Tool {
	d := c.Descriptor
	var schema json.RawMessage = d.InputSchema
	var probe struct {
		Type any `json:"type"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &probe) != nil || probe.Type != "object" {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	meta := mcp.Meta{"capmesh/provider": c.Provider, "capmesh/capability_uri": d.URI()}
	if d.Risk != "" {
		meta["capmesh/risk"] = d.Risk
	}
	return &mcp.Tool{Name: d.ID, Description: d.Description, InputSchema: schema, Meta: meta}
}

// forward is the handler of one capability's tool.
func forward(up *Upstream, method string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		params := map[string]json.RawMessage{}
		if args := req.Params.Arguments; len(args) > 0 && string(args) != "null" {
			if err := json.Unmarshal(args, &params); err != nil {
				return toolError(jsonrpc.Errorf(jsonrpc.InvalidParams, "arguments must be a JSON object")), nil
			}
		}
		delete(params, "_meta")
		meta := map[string]any{}
		corr, _ := req.Params.Meta[MetaCorrelationID].(string)
		if tok := req.Params.GetProgressToken(); tok != nil {
			own := newToken()
			ss := req.Session
			up.progress.Store(own, func(p progressParams) {
				np := &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: p.Progress, Message: p.Message}
				if p.Total != nil {
					np.Total = *p.Total
				}
				_ = ss.NotifyProgress(context.WithoutCancel(ctx), np)
			})
			defer forgetLater(&up.progress, own)
			if corr == "" {
				corr = newToken()
			}
			meta["correlation"] = map[string]any{"correlation_id": corr, "baggage": map[string]any{BaggageProgressToken: own}}
		} else if corr != "" {
			meta["correlation_id"] = corr
		}
		if len(meta) > 0 {
			params["_meta"], _ = json.Marshal(meta)
		}
		var res json.RawMessage
		if err := up.Call(ctx, method, params, &res); err != nil {
			return toolError(err), nil
		}
		return toolResult(res), nil
	}
}

// toolResult maps a capability's result to an MCP tool result.
func toolResult(res json.RawMessage) *mcp.CallToolResult {
	var probe struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(res, &probe) == nil && len(probe.Content) > 0 && probe.Content[0] == '[' {
		var r mcp.CallToolResult
		if json.Unmarshal(res, &r) == nil {
			return &r
		}
	}
	out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(res)}}}
	if len(res) > 0 && res[0] == '{' {
		out.StructuredContent = res
	}
	return out
}

// ToolErrorContent is the structured content of an MCP tool error for a
// capmesh call that did not succeed.
type ToolErrorContent struct {
	// Code and Message are the JSON-RPC error's.
	Code    int64  `json:"code"`
	Message string `json:"message"`
	// Outcome, Denial, Error, CorrelationID, InvocationID and EvidenceIDs
	// come from the InvocationResult the error carries, when the callee's
	// CHP boundary ran.
	Outcome       chp.Outcome       `json:"outcome,omitempty"`
	Denial        *chp.DenialReason `json:"denial,omitempty"`
	Error         *chp.ErrorInfo    `json:"error,omitempty"`
	CorrelationID string            `json:"correlation_id,omitempty"`
	InvocationID  string            `json:"invocation_id,omitempty"`
	EvidenceIDs   []string          `json:"evidence_ids,omitempty"`
	// Data is the error's data when it is not an InvocationResult.
	Data json.RawMessage `json:"data,omitempty"`
}

// toolError maps an error of a capmesh call to an MCP tool error.
func toolError(err error) *mcp.CallToolResult {
	sc := ToolErrorContent{Code: -32603, Message: err.Error()}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		sc.Code, sc.Message = int64(je.Code), je.Message
		var r chp.InvocationResult
		if len(je.Data) > 0 && json.Unmarshal(je.Data, &r) == nil && r.Outcome != "" {
			sc.Outcome, sc.Denial, sc.Error = r.Outcome, r.Denial, r.Error
			sc.CorrelationID, sc.InvocationID, sc.EvidenceIDs = r.Correlation.CorrelationID, r.InvocationID, r.EvidenceIDs
		} else {
			sc.Data = je.Data
		}
	}
	text := sc.Message
	if len(sc.EvidenceIDs) > 0 {
		text += " (correlation " + sc.CorrelationID + ", evidence " + strings.Join(sc.EvidenceIDs, ", ") + ")"
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: sc}
}
