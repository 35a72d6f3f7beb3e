package mcpbridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/canonical/govalue"
	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/boundary/governance"
	"github.com/capmesh/capmesh/fingerprint"
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/jsonrpc"
)

const (
	// MetaCorrelationID is the `_meta` key under which the bridge gives the
	// MCP server the CHP correlation id of a call.
	MetaCorrelationID = "capmesh/correlation_id"
	// BaggageProgressToken is the member of a call's correlation baggage
	// that holds the caller's MCP progress token.
	BaggageProgressToken = "mcp_progress_token"
	// NotifyProgress is the notification a wrapped host sends on the
	// caller's connection for each progress notification of the MCP server.
	NotifyProgress = "mcp.progress"
	// PinPolicyVersion names the policy of a bridge with pins in decision
	// records when the host configured none.
	PinPolicyVersion = "mcpbridge-pins"
)

// Tool is one MCP tool as a wrapped host serves it.
type Tool struct {
	// Name is the MCP tool name; Method the capmesh method it is served as.
	Name, Method string
	// Hash is the tool's khoralabs fingerprint: fingerprint.ToolSpec of its
	// name, description and inputSchema.
	Hash string
	// Pinned is the hash the pins expect ("" when the tool is not pinned);
	// Blocked is true when pins were given and Hash differs from Pinned (or
	// the tool is not pinned at all): the host's policy refuses its calls.
	Pinned  string
	Blocked bool
	// Disabled is true once the tool's definition changed, or the tool
	// disappeared, while the bridge served it (after a
	// notifications/tools/list_changed): its calls are skipped, with
	// evidence, until the bridge is restarted.
	Disabled bool
	// Def is the definition tools/list returned.
	Def *mcp.Tool
}

// WrapConfig configures Wrap. The zero value wraps with defaults.
type WrapConfig struct {
	// Info names the host. Empty fields default to the MCP server's
	// serverInfo: Name and Domain from ToDomain(name), Version from its
	// version (or "0.0.0").
	Info host.Info
	// Host configures the host (socket, node, evidence …). Nil means the
	// host defaults. Its CHP policy, when set, is kept; the bridge adds the
	// blocked tools of Pins to a copy of it.
	Host *host.Config
	// Pins, when non-nil, pin tool fingerprints: a tool whose hash is not
	// the pinned one — changed, or not pinned at all — is served but
	// refused by policy (a denial with evidence), never forwarded.
	Pins []fingerprint.ToolRef
	// Client names the bridge to the MCP server. Default capmesh-mcpbridge.
	Client *mcp.Implementation
	// Describe, when set, edits each tool's CHP descriptor after the
	// bridge has filled it in: an autonomy profile (approval tier, action
	// and spend budgets per correlation), invariants, another risk tier.
	Describe func(t Tool, d *chp.CapabilityDescriptor)
	// OnToolsChanged, when set, is called with every tool after the bridge
	// has applied a notifications/tools/list_changed of the server.
	OnToolsChanged func([]Tool)
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Bridge is an MCP server served as a capmesh host.
type Bridge struct {
	// Host serves the tools; Serve runs it.
	Host *host.Host

	cs        *mcp.ClientSession
	server    *mcp.Implementation
	log       *slog.Logger
	domain    string
	pins      map[string]string // nil: no pins
	onChanged func([]Tool)
	describe  func(Tool, *chp.CapabilityDescriptor)
	progress  sync.Map // bridge token (string) → progressSink
	refreshMu sync.Mutex
	// refreshes are the tools/list_changed re-listings running; stop ends
	// them, and Close waits for them. stopMu orders starting one against
	// Close.
	refreshes sync.WaitGroup
	stopMu    sync.Mutex
	stop      context.Context
	stopNow   context.CancelFunc

	mu       sync.Mutex // guards the tools
	tools    []*Tool    // in name order
	byMethod map[string]*Tool
	byName   map[string]*Tool
}

// progressSink is where the progress of one forwarded call goes.
type progressSink struct {
	notify      jsonrpc.Notifier
	token       json.RawMessage
	correlation string
}

// Wrap connects to the MCP server at t (an mcp.CommandTransport for a stdio
// server, an mcp.StreamableClientTransport for a URL), lists its tools,
// fingerprints them and returns a Bridge whose Host serves one capability per
// tool. The host is not serving yet: call Serve. On error nothing stays open.
func Wrap(ctx context.Context, t mcp.Transport, cfg *WrapConfig) (*Bridge, error) {
	if cfg == nil {
		cfg = &WrapConfig{}
	}
	b := &Bridge{log: cfg.Logger, byMethod: map[string]*Tool{}, byName: map[string]*Tool{}, onChanged: cfg.OnToolsChanged, describe: cfg.Describe}
	if cfg.Pins != nil {
		b.pins = map[string]string{}
		for _, p := range cfg.Pins {
			b.pins[p.ToolKey] = p.ToolHash
		}
	}
	if b.log == nil {
		b.log = slog.Default()
	}
	impl := cfg.Client
	if impl == nil {
		impl = &mcp.Implementation{Name: "capmesh-mcpbridge", Version: "0.1.0"}
	}
	b.stop, b.stopNow = context.WithCancel(context.Background())
	client := mcp.NewClient(impl, &mcp.ClientOptions{ProgressNotificationHandler: b.onProgress,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			b.stopMu.Lock()
			defer b.stopMu.Unlock()
			if b.stop.Err() == nil {
				b.refreshes.Go(b.refresh)
			}
		}})
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		b.stopRefreshes()
		return nil, fmt.Errorf("mcpbridge: connect: %w", err)
	}
	b.refreshMu.Lock() // a list_changed may come during the handshake
	b.cs = cs
	b.refreshMu.Unlock()
	if err := b.build(ctx, cfg); err != nil {
		b.stopRefreshes()
		cs.Close()
		return nil, err
	}
	return b, nil
}

// build lists and fingerprints the tools and creates the host. A
// tools/list_changed that arrives meanwhile is applied after it.
func (b *Bridge) build(ctx context.Context, cfg *WrapConfig) error {
	b.refreshMu.Lock()
	defer b.refreshMu.Unlock()
	b.server = &mcp.Implementation{Name: "mcp-server", Version: "0.0.0"}
	if ir := b.cs.InitializeResult(); ir != nil && ir.ServerInfo != nil {
		b.server = ir.ServerInfo
	}
	info := cfg.Info
	if info.Domain == "" {
		info.Domain = ToDomain(b.server.Name)
	}
	if info.Name == "" {
		info.Name = strings.ReplaceAll(info.Domain, "_", "-")
	}
	if info.Version == "" {
		info.Version = semverOr(b.server.Version)
	}
	if info.Description == "" {
		info.Description = "MCP server " + b.server.Name + " " + b.server.Version + " (capmesh mcpbridge)"
	}
	tools, err := ListTools(ctx, b.cs, info.Domain, cfg.Pins)
	if err != nil {
		return err
	}
	b.domain = info.Domain
	hc := host.Config{}
	if cfg.Host != nil {
		hc = *cfg.Host
	}
	hc.CHP.Policy = pinPolicy(hc.CHP.Policy, tools)
	if hc.Logger == nil {
		hc.Logger = b.log
	}
	h, err := host.New(info, &hc)
	if err != nil {
		return fmt.Errorf("mcpbridge: %w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range tools {
		t := &tools[i]
		b.tools = append(b.tools, t)
		b.byMethod[t.Method], b.byName[t.Name] = t, t
		if err := b.register(h, t); err != nil {
			h.Close()
			return err
		}
	}
	b.Host = h
	return nil
}

// ListTools lists every tool of an MCP session (all pages) and returns them
// in name order with their methods under domain and their fingerprints,
// checked against pins when pins is non-nil.
func ListTools(ctx context.Context, cs *mcp.ClientSession, domain string, pins []fingerprint.ToolRef) ([]Tool, error) {
	var defs []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("mcpbridge: tools/list: %w", err)
		}
		defs = append(defs, t)
	}
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	methods := Methods(domain, names)
	pinned := map[string]string{}
	for _, p := range pins {
		pinned[p.ToolKey] = p.ToolHash
	}
	seen := map[string]bool{}
	var tools []Tool
	for _, d := range defs {
		if seen[d.Name] {
			return nil, fmt.Errorf("mcpbridge: tools/list names tool %q twice", d.Name)
		}
		seen[d.Name] = true
		h, err := ToolHash(d)
		if err != nil {
			return nil, fmt.Errorf("mcpbridge: tool %q: %w", d.Name, err)
		}
		t := Tool{Name: d.Name, Method: methods[d.Name], Hash: h, Def: d, Pinned: pinned[d.Name]}
		t.Blocked = pins != nil && t.Pinned != h
		tools = append(tools, t)
	}
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
	return tools, nil
}

// ToolHash is the khoralabs fingerprint of an MCP tool definition: the hash
// of the evaluated tool spec (fingerprint.ToolSpec) with its name, its
// description (absent when empty) and its inputSchema as the JSON Schema.
// Title, annotations and outputSchema are not part of it.
func ToolHash(d *mcp.Tool) (string, error) {
	raw, err := json.Marshal(d.InputSchema)
	if err != nil {
		return "", err
	}
	v, err := canonical.Parse(raw)
	if err != nil {
		return "", err
	}
	spec := fingerprint.ToolSpec{Name: d.Name, InputSchema: fingerprint.JSONSchema(v)}
	if d.Description != "" {
		desc := d.Description
		spec.Description = &desc
	}
	return spec.Hash()
}

// pinPolicy returns the policy to run: p (or none) plus a block of every
// blocked tool's method. p itself is not modified.
func pinPolicy(p *governance.PolicyConfig, tools []Tool) *governance.PolicyConfig {
	var blocked []string
	for _, t := range tools {
		if t.Blocked {
			blocked = append(blocked, t.Method)
		}
	}
	if len(blocked) == 0 {
		return p
	}
	out := &governance.PolicyConfig{Version: PinPolicyVersion}
	if p != nil {
		out = &governance.PolicyConfig{
			AllowedCapabilityIDs: p.AllowedCapabilityIDs,
			BlockCapabilityIDs:   append([]string(nil), p.BlockCapabilityIDs...),
			MaxRiskTier:          p.MaxRiskTier,
			BlockPatterns:        p.BlockPatterns,
			AuditOnly:            p.AuditOnly,
			Version:              p.Version,
		}
	}
	out.BlockCapabilityIDs = append(out.BlockCapabilityIDs, blocked...)
	return out
}

// semverOr returns v when it looks like a SemVer version, else "0.0.0".
func semverOr(v string) string {
	parts := strings.SplitN(strings.SplitN(v, "-", 2)[0], ".", 3)
	if len(parts) != 3 {
		return "0.0.0"
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return "0.0.0"
		}
	}
	return v
}

// Tools returns the wrapped tools in name order.
func (b *Bridge) Tools() []Tool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.toolsLocked()
}

func (b *Bridge) toolsLocked() []Tool {
	out := make([]Tool, len(b.tools))
	for i, t := range b.tools {
		out[i] = *t
	}
	return out
}

// ToolFor maps a method back to its MCP tool.
func (b *Bridge) ToolFor(method string) (Tool, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.byMethod[method]
	if !ok {
		return Tool{}, false
	}
	return *t, true
}

// Session returns the MCP client session the bridge forwards to.
func (b *Bridge) Session() *mcp.ClientSession { return b.cs }

// ErrSessionEnded is returned by Serve when the MCP server ended the
// session (a stdio server exited, a remote one went away): the host drains
// and stops rather than serve tools nobody answers.
var ErrSessionEnded = errors.New("mcpbridge: the MCP server ended the session")

// Serve serves the host until ctx ends (see host.Host.Serve) or the MCP
// server ends the session, then closes the session. It returns nil after a
// graceful stop and an error wrapping ErrSessionEnded when the server went
// away.
func (b *Bridge) Serve(ctx context.Context) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ended := make(chan error, 1)
	go func() {
		ended <- b.cs.Wait()
		cancel()
	}()
	err := b.Host.Serve(sctx)
	b.stopRefreshes()
	defer b.refreshes.Wait()
	if cerr := b.cs.Close(); cerr != nil {
		b.log.Debug("mcpbridge: closing the MCP session", "err", cerr)
	}
	if err == nil && ctx.Err() == nil {
		select {
		case werr := <-ended:
			if werr != nil {
				return fmt.Errorf("%w: %v", ErrSessionEnded, werr)
			}
			return ErrSessionEnded
		default:
		}
	}
	return err
}

// Close releases a bridge that never served: the host and the MCP session.
func (b *Bridge) Close() error {
	b.stopRefreshes()
	herr := b.Host.Close()
	cerr := b.cs.Close()
	b.refreshes.Wait()
	return errors.Join(herr, cerr)
}

// stopRefreshes ends the running tools/list_changed re-listings and lets
// no new one start.
func (b *Bridge) stopRefreshes() {
	b.stopMu.Lock()
	defer b.stopMu.Unlock()
	b.stopNow()
}

// Link states the wrapped tools as a khoralabs capability link: agent id
// and name from the server's serverInfo, the static hash of that serverInfo
// ({name, version}), and a runtime of every tool with its fingerprint. Two
// links of one server differ exactly where a tool was added, removed or
// changed; `capmesh hash diff` shows where, and a link is the pin file of
// `capmesh mcp wrap --pin`.
func (b *Bridge) Link() (*fingerprint.CapabilityLink, error) {
	return LinkOf(b.server, b.Tools())
}

// LinkOf is Bridge.Link for a server and its tools.
func LinkOf(server *mcp.Implementation, tools []Tool) (*fingerprint.CapabilityLink, error) {
	sv, err := govalue.FromGo(map[string]any{"name": server.Name, "version": server.Version})
	if err != nil {
		return nil, err
	}
	static, err := fingerprint.HashPlainObject(sv)
	if err != nil {
		return nil, err
	}
	rt := fingerprint.Runtime{NameToStaticHash: map[string]string{}}
	for _, t := range tools {
		rt.EnabledToolNames = append(rt.EnabledToolNames, t.Name)
		rt.NameToStaticHash[t.Name] = t.Hash
	}
	name := server.Title
	if name == "" {
		name = server.Name
	}
	return fingerprint.CreateCapabilityLink(fingerprint.LinkInput{AgentID: server.Name, AgentName: name, StaticHash: static, Runtime: rt})
}

// progressGrace is how long after a forwarded call returns its progress
// notifications are still delivered: the go-sdk hands notifications to their
// handler apart from responses, so the last ones may come after the result.
const progressGrace = 5 * time.Second

// forgetLater deletes key from m after progressGrace.
func forgetLater(m *sync.Map, key string) {
	time.AfterFunc(progressGrace, func() { m.Delete(key) })
}

// newToken returns a fresh progress token for one forwarded call.
func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "capmesh-" + hex.EncodeToString(b[:])
}

// onProgress forwards a progress notification of the MCP server to the
// connection of the call it belongs to.
func (b *Bridge) onProgress(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
	tok, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	v, ok := b.progress.Load(tok)
	if !ok {
		return
	}
	s := v.(progressSink)
	p := progressParams{ProgressToken: s.token, Progress: req.Params.Progress, Message: req.Params.Message, CorrelationID: s.correlation}
	if req.Params.Total != 0 {
		total := req.Params.Total
		p.Total = &total
	}
	if err := s.notify.Notify(ctx, NotifyProgress, p); err != nil {
		b.log.Debug("mcpbridge: progress not delivered", "err", err)
	}
}

// progressParams are the params of an mcp.progress notification.
type progressParams struct {
	ProgressToken json.RawMessage `json:"progressToken"`
	Progress      float64         `json:"progress"`
	Total         *float64        `json:"total,omitempty"`
	Message       string          `json:"message,omitempty"`
	CorrelationID string          `json:"correlation_id,omitempty"`
}

// register adds one tool to h as a raw CHP capability.
func (b *Bridge) register(h *host.Host, t *Tool) error {
	in, err := json.Marshal(t.Def.InputSchema)
	if err != nil || string(in) == "null" {
		in = json.RawMessage(`{"type":"object"}`)
	}
	meta := map[string]any{"mcp_tool": t.Name, "tool_hash": t.Hash, "mcp_server": b.server.Name}
	if t.Pinned != "" {
		meta["pinned_hash"] = t.Pinned
	}
	if t.Def.Title != "" {
		meta["mcp_title"] = t.Def.Title
	}
	opts := []host.CapOption{
		host.Description(descriptionOf(t)),
		host.Tags("mcp"),
		host.Risk(riskOf(t.Def.Annotations)),
	}
	if a := t.Def.Annotations; a != nil {
		meta["mcp_annotations"] = a
		if a.IdempotentHint {
			opts = append(opts, host.Idempotent())
		}
	}
	opts = append(opts, host.Descriptor(func(d *chp.CapabilityDescriptor) {
		merged := map[string]any{}
		if len(d.Metadata) > 0 {
			_ = json.Unmarshal(d.Metadata, &merged)
		}
		for k, v := range meta {
			merged[k] = v
		}
		d.Metadata, _ = json.Marshal(merged)
		if b.describe != nil {
			b.describe(*t, d)
		}
	}))
	if err := h.RegisterCHP(t.Method, b.handler(t), in, nil, opts...); err != nil {
		return fmt.Errorf("mcpbridge: tool %q as %s: %w", t.Name, t.Method, err)
	}
	return nil
}

// descriptionOf is a capability's description: the tool's, else its title,
// else a sentence naming it.
func descriptionOf(t *Tool) string {
	switch {
	case t.Def.Description != "":
		return t.Def.Description
	case t.Def.Title != "":
		return t.Def.Title
	}
	return "MCP tool " + t.Name
}

// riskOf maps a tool's hints to a CHP risk tier: read-only is low,
// destructive (the MCP default when a tool is not read-only and says
// nothing) is high, and a tool that declares itself not destructive medium.
func riskOf(a *mcp.ToolAnnotations) string {
	switch {
	case a == nil:
		return "medium"
	case a.ReadOnlyHint:
		return "low"
	case a.DestructiveHint != nil && !*a.DestructiveHint:
		return "medium"
	case a.DestructiveHint != nil && *a.DestructiveHint:
		return "high"
	}
	return "medium"
}

// handler forwards one call of t to the MCP server as tools/call.
func (b *Bridge) handler(t *Tool) boundary.Handler {
	return func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
		params := &mcp.CallToolParams{Name: t.Name, Arguments: payload, Meta: mcp.Meta{}}
		if env, ok := boundary.InvocationFromContext(ctx); ok {
			corr := env.Correlation.CorrelationID
			if corr != "" {
				params.Meta[MetaCorrelationID] = corr
			}
			if tok := progressToken(env.Correlation.Baggage); tok != nil {
				if n, ok := jsonrpc.NotifierFromContext(ctx); ok {
					own := newToken()
					b.progress.Store(own, progressSink{notify: n, token: tok, correlation: corr})
					defer forgetLater(&b.progress, own)
					params.Meta["progressToken"] = own
				}
			}
		}
		res, err := b.cs.CallTool(ctx, params)
		if err != nil {
			return nil, fmt.Errorf("tools/call %s: %w", t.Name, err)
		}
		if res.IsError {
			return nil, &ToolError{Tool: t.Name, Text: textOf(res.Content)}
		}
		return json.Marshal(res)
	}
}

// ToolError is the failure of a call the MCP server answered with isError.
type ToolError struct {
	Tool, Text string
}

// Error implements error.
func (e *ToolError) Error() string {
	if e.Text == "" {
		return "MCP tool " + e.Tool + " failed"
	}
	return "MCP tool " + e.Tool + ": " + e.Text
}

// progressToken returns the caller's progress token from correlation
// baggage, or nil.
func progressToken(baggage json.RawMessage) json.RawMessage {
	if len(baggage) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(baggage, &m) != nil {
		return nil
	}
	tok := m[BaggageProgressToken]
	if len(tok) == 0 || string(tok) == "null" {
		return nil
	}
	return tok
}

// textOf joins the text content of a result.
func textOf(cs []mcp.Content) string {
	var parts []string
	for _, c := range cs {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// refresh applies a notifications/tools/list_changed: a new tool is
// registered (disabled when pins are set and it is not pinned with its
// hash); a tool whose fingerprint changed, or that is gone, is disabled —
// its calls are skipped with evidence — until the bridge restarts, since the
// definition the operator accepted is no longer the one the server runs.
func (b *Bridge) refresh() {
	b.refreshMu.Lock()
	defer b.refreshMu.Unlock()
	if b.cs == nil {
		b.log.Debug("mcpbridge: tools/list_changed during the handshake: the listing that follows covers it")
		return
	}
	ctx, cancel := context.WithTimeout(b.stop, 30*time.Second)
	defer cancel()
	latest, err := ListTools(ctx, b.cs, b.domain, nil)
	if err != nil {
		if b.stop.Err() != nil {
			b.log.Debug("mcpbridge: re-listing tools cancelled: the bridge is closing", "err", err)
			return
		}
		b.log.Warn("mcpbridge: re-listing tools after tools/list_changed", "err", err)
		return
	}
	b.mu.Lock()
	seen := map[string]bool{}
	for i := range latest {
		nt := &latest[i]
		seen[nt.Name] = true
		old, ok := b.byName[nt.Name]
		switch {
		case !ok:
			b.addLocked(nt)
		case old.Hash != nt.Hash && !old.Disabled:
			b.disableLocked(old, "its definition changed", "hash", nt.Hash)
		}
	}
	for _, t := range b.tools {
		if !seen[t.Name] && !t.Disabled {
			b.disableLocked(t, "the server no longer lists it")
		}
	}
	tools := b.toolsLocked()
	b.mu.Unlock()
	if b.onChanged != nil {
		b.onChanged(tools)
	}
}

// addLocked serves a tool the server added while wrapped.
func (b *Bridge) addLocked(t *Tool) {
	op := ToOperation(t.Name)
	t.Method = b.domain + "." + op
	for i := 2; b.byMethod[t.Method] != nil; i++ {
		t.Method = b.domain + "." + op + "_" + strconv.Itoa(i)
	}
	if b.pins != nil {
		t.Pinned = b.pins[t.Name]
		t.Blocked = t.Pinned != t.Hash
	}
	if err := b.register(b.Host, t); err != nil {
		b.log.Warn("mcpbridge: a tool the server added cannot be served", "tool", t.Name, "err", err)
		return
	}
	b.tools = append(b.tools, t)
	sort.Slice(b.tools, func(i, j int) bool { return b.tools[i].Name < b.tools[j].Name })
	b.byMethod[t.Method], b.byName[t.Name] = t, t
	b.log.Info("mcpbridge: the server added a tool", "tool", t.Name, "method", t.Method, "hash", t.Hash)
	if t.Blocked {
		b.disableLocked(t, "it is not pinned with this fingerprint")
	}
}

// disableLocked disables t's capability.
func (b *Bridge) disableLocked(t *Tool, why string, attrs ...any) {
	t.Disabled = true
	if err := b.Host.Boundary().SetEnabled(t.Method, b.Host.Info().Version, false); err != nil {
		b.log.Error("mcpbridge: cannot disable a tool", "tool", t.Name, "method", t.Method, "err", err)
		return
	}
	b.log.Warn("mcpbridge: tool disabled: "+why, append([]any{"tool", t.Name, "method", t.Method}, attrs...)...)
}
