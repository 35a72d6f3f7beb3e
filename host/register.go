package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"time"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/wire"
)

// method is one registered entry of the host's table.
type method struct {
	name     string
	handler  jsonrpc.Handler // what a JSON-RPC call of name runs
	cost     *wire.CostEstimate
	requires []string
	chp      bool // a CHP capability (evidence), not a raw handler
}

// capOptions collects what CapOptions set.
type capOptions struct {
	desc     chp.CapabilityDescriptor
	cost     *wire.CostEstimate
	requires []string
	err      error
	stream   boundary.StreamHandler // set by RegisterStream
}

// A CapOption declares something about a capability beyond its handler:
// its description, cost, prerequisites, or CHP descriptor fields.
type CapOption func(*capOptions)

// Description sets the capability's human-readable description.
func Description(s string) CapOption {
	return func(o *capOptions) { o.desc.Description = s }
}

// Cost declares the capability's cost estimate (cost_estimates of
// capabilities.list): cpu "low", "medium" or "high" (wire.CostLow, …), the
// expected latency, and optionally memory and GPU eligibility.
func Cost(c wire.CostEstimate) CapOption {
	return func(o *capOptions) {
		switch c.CPU {
		case wire.CostLow, wire.CostMedium, wire.CostHigh:
		default:
			o.err = fmt.Errorf("cost cpu %q: want low, medium or high", c.CPU)
			return
		}
		if c.LatencyMS < 0 || (c.MemoryBytes != nil && *c.MemoryBytes < 0) {
			o.err = errors.New("cost: latency_ms and memory_bytes must not be negative")
			return
		}
		o.cost = &c
	}
}

// Requires declares the methods that must have run before this one
// (operation_dependencies). Each must be a method of this host or one it
// Consumes; Serve checks that.
func Requires(methods ...string) CapOption {
	return func(o *capOptions) { o.requires = append(o.requires, methods...) }
}

// Version sets the capability's CHP version. Default: the host's version.
func Version(v string) CapOption {
	return func(o *capOptions) { o.desc.Version = v }
}

// Risk sets the CHP risk tier: "low", "medium", "high" or "critical".
func Risk(tier string) CapOption {
	return func(o *capOptions) { o.desc.Risk = tier }
}

// Tags sets the CHP descriptor's tags.
func Tags(tags ...string) CapOption {
	return func(o *capOptions) { o.desc.Tags = append(o.desc.Tags, tags...) }
}

// Timeout bounds each execution; the CHP boundary records a handler that
// overruns it as failed (or indeterminate when it ignores cancellation).
func Timeout(d time.Duration) CapOption {
	return func(o *capOptions) {
		s := d.Seconds()
		o.desc.TimeoutS = &s
	}
}

// Idempotent declares that repeating an invocation has no further effect.
// CHP's descriptor field "idempotency" is about something else (whether a
// caller may or must send an idempotency key, one of required, optional,
// not_supported), so the declaration goes into the descriptor's metadata as
// "idempotent": true; planners and UIs read it there.
func Idempotent() CapOption {
	return func(o *capOptions) {
		meta := map[string]any{}
		if len(o.desc.Metadata) > 0 {
			_ = json.Unmarshal(o.desc.Metadata, &meta)
		}
		meta["idempotent"] = true
		if b, err := json.Marshal(meta); err == nil {
			o.desc.Metadata = b
		}
	}
}

// Descriptor edits the CHP capability descriptor directly, for the fields
// no other option covers (invariants, autonomy, owner, metadata). The id,
// schemas and version set by the host can be overridden here too.
func Descriptor(edit func(*chp.CapabilityDescriptor)) CapOption {
	return func(o *capOptions) { edit(&o.desc) }
}

// Register adds a capability: method (domain.operation, checked now against
// wire.MethodNamePattern) answered by fn. In and Out are ordinary Go types
// whose JSON Schemas are inferred now (see InferSchema): params are
// validated against In's schema before fn runs, so fn always gets a
// well-formed In, and a call with invalid params is answered -32602 naming
// the field. Every call — direct (`kv.get`) or through chp.invoke — passes
// the host's CHP boundary and leaves execution evidence.
//
// In must be a struct (or pointer to one), a map with string keys, or
// json.RawMessage / any (no schema: fn gets the params object as is).
// An error from fn is the call's failure; one carrying a JSON-RPC code
// (a *jsonrpc.Error or a jsonrpc.Code) is answered with that code.
//
// Register may be called before or while the host serves; the
// capabilities.list envelope is rebuilt and re-signed on each change.
func Register[In, Out any](h *Host, method string, fn func(ctx context.Context, in In) (Out, error), opts ...CapOption) error {
	if fn == nil {
		return fmt.Errorf("host: %s: nil handler", method)
	}
	in, err := InferSchema(reflect.TypeFor[In]())
	if err != nil {
		return fmt.Errorf("host: %s: params type: %w", method, err)
	}
	if in != nil && !objectLike(reflect.TypeFor[In]()) {
		return fmt.Errorf("host: %s: params type %v: want a struct, a map with string keys, json.RawMessage or any (params are a JSON object)", method, reflect.TypeFor[In]())
	}
	out, err := InferSchema(reflect.TypeFor[Out]())
	if err != nil {
		return fmt.Errorf("host: %s: result type: %w", method, err)
	}
	handler := func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
		var v In
		if err := json.Unmarshal(payload, &v); err != nil {
			return nil, noteCode(ctx, jsonrpc.Errorf(jsonrpc.InvalidParams, "Invalid params: %v", err))
		}
		res, err := fn(ctx, v)
		if err != nil {
			return nil, noteCode(ctx, err)
		}
		return json.Marshal(res)
	}
	return h.registerCHP(method, handler, in, out, opts)
}

// RegisterCHP adds a capability with a raw CHP handler and explicit
// schemas (nil for none), for hosts that work on JSON directly.
func (h *Host) RegisterCHP(method string, fn boundary.Handler, inputSchema, outputSchema json.RawMessage, opts ...CapOption) error {
	if fn == nil {
		return fmt.Errorf("host: %s: nil handler", method)
	}
	wrapped := func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
		res, err := fn(ctx, payload)
		if err != nil {
			return nil, noteCode(ctx, err)
		}
		return res, nil
	}
	return h.registerCHP(method, wrapped, inputSchema, outputSchema, opts)
}

func (h *Host) registerCHP(name string, fn boundary.Handler, in, out json.RawMessage, opts []CapOption) error {
	o, err := collect(name, opts)
	if err != nil {
		return err
	}
	if isBuiltin(name) {
		return fmt.Errorf("host: %s is a built-in method", name)
	}
	d := o.desc
	if d.ID == "" {
		d.ID = name
	}
	if d.ID != name {
		return fmt.Errorf("host: %s: a capability's CHP id must be its method name, not %q", name, d.ID)
	}
	if d.Version == "" {
		d.Version = h.info.Version
	}
	if d.Description == "" {
		d.Description = name
	}
	if d.InputSchema == nil {
		d.InputSchema = in
	}
	if d.OutputSchema == nil {
		d.OutputSchema = out
	}
	if d.InputSchema, err = boundarySchema(d.InputSchema); err != nil {
		return fmt.Errorf("host: %s: input schema: %w", name, err)
	}
	if d.OutputSchema, err = boundarySchema(d.OutputSchema); err != nil {
		return fmt.Errorf("host: %s: output schema: %w", name, err)
	}
	pv, err := compileParams(d.InputSchema)
	if err != nil {
		return fmt.Errorf("host: %s: input schema: %w", name, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, dup := h.caps[name]; dup {
		return fmt.Errorf("host: %s is already registered", name)
	}
	if err := h.b.Register(boundary.Capability{Descriptor: d, Handler: fn, Stream: o.stream}); err != nil {
		return fmt.Errorf("host: %s: %w", name, err)
	}
	h.caps[name] = &method{name: name, handler: h.direct(pv), cost: o.cost, requires: o.requires, chp: true}
	return h.changedLocked()
}

// Handle adds a raw JSON-RPC method that does not pass the CHP boundary and
// leaves no evidence — for infrastructure such as a registry's ipc.* methods,
// not for capabilities. It is advertised in methods like any other, and
// Description/Cost/Requires apply; the CHP descriptor options are ignored.
func (h *Host) Handle(name string, hd jsonrpc.Handler, opts ...CapOption) error {
	if hd == nil {
		return fmt.Errorf("host: %s: nil handler", name)
	}
	o, err := collect(name, opts)
	if err != nil {
		return err
	}
	if isBuiltin(name) {
		return fmt.Errorf("host: %s is a built-in method", name)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, dup := h.caps[name]; dup {
		return fmt.Errorf("host: %s is already registered", name)
	}
	h.caps[name] = &method{name: name, handler: hd, cost: o.cost, requires: o.requires}
	return h.changedLocked()
}

// Mount adds a whole jsonrpc.Assigner, asked for every method the host
// does not answer itself (in the order mounted). If it implements
// jsonrpc.Lister its names are advertised in methods, so each must be a
// valid method name and must be assigned a handler. Like Handle, mounted
// methods do not pass the CHP boundary. The capmesh node mounts its
// registry this way, fallback routing included.
func (h *Host) Mount(a jsonrpc.Assigner) error {
	if a == nil {
		return errors.New("host: Mount: nil assigner")
	}
	var names []string
	if l, ok := a.(jsonrpc.Lister); ok {
		names = l.Names()
		for _, n := range names {
			if err := wire.ValidateMethodName(n); err != nil {
				return fmt.Errorf("host: Mount: advertised method: %w", err)
			}
			if a.Assign(context.Background(), n) == nil {
				return fmt.Errorf("host: Mount: %s is listed but has no handler", n)
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mounts = append(h.mounts, a)
	h.mountList = append(h.mountList, names...)
	return h.changedLocked()
}

// Annotate declares the cost and prerequisites (Cost, Requires,
// Description) of a method the host answers through Handle or Mount, whose
// handler it did not register with options. It fails for a method the host
// does not advertise.
func (h *Host) Annotate(name string, opts ...CapOption) error {
	o, err := collect(name, opts)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if m, ok := h.caps[name]; ok {
		if o.cost != nil {
			m.cost = o.cost
		}
		m.requires = append(m.requires, o.requires...)
		return h.changedLocked()
	}
	if !slices.Contains(h.mountList, name) {
		return fmt.Errorf("host: Annotate: %s is not a method of this host", name)
	}
	if h.notes == nil {
		h.notes = map[string]*capOptions{}
	}
	if prev := h.notes[name]; prev != nil {
		if o.cost == nil {
			o.cost = prev.cost
		}
		o.requires = append(prev.requires, o.requires...)
	}
	h.notes[name] = o
	return h.changedLocked()
}

// MountHTTP serves handler at pattern (an http.ServeMux pattern) on the
// HTTP listener, beside /jsonrpc and the CHP binding (which has "/"). Call
// it before Serve.
func (h *Host) MountHTTP(pattern string, handler http.Handler) error {
	return h.mountHTTP(httpMount{pattern: pattern, h: handler})
}

// MountHTTPKeyed is MountHTTP for an operator's resource, such as the
// Prometheus exposition of package telemetry at /metrics: a host without
// keys serves it to whoever reaches its HTTP listener (loopback only,
// unless Config.InsecureListen), as it serves discovery; a host with keys
// only to requests presenting one of them in X-CHP-Key (docs/access.md).
func (h *Host) MountHTTPKeyed(pattern string, handler http.Handler) error {
	return h.mountHTTP(httpMount{pattern: pattern, h: handler, keyed: true})
}

func (h *Host) mountHTTP(m httpMount) error {
	pattern := m.pattern
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.serving || h.served {
		return errors.New("host: MountHTTP after Serve")
	}
	if pattern == "/jsonrpc" || pattern == "/" {
		return fmt.Errorf("host: MountHTTP: %s is the host's own", pattern)
	}
	h.https = append(h.https, m)
	return nil
}

// Consumes declares methods this host calls on other hosts
// (consumed_capabilities), so a composition can be checked for
// completeness. Each must be a valid method name.
func (h *Host) Consumes(methods ...string) error {
	for _, m := range methods {
		if err := wire.ValidateMethodName(m); err != nil {
			return fmt.Errorf("host: Consumes: %w", err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range methods {
		if !slices.Contains(h.consumed, m) {
			h.consumed = append(h.consumed, m)
		}
	}
	return h.changedLocked()
}

func collect(name string, opts []CapOption) (*capOptions, error) {
	if err := wire.ValidateMethodName(name); err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	o := &capOptions{}
	for _, opt := range opts {
		opt(o)
		if o.err != nil {
			return nil, fmt.Errorf("host: %s: %w", name, o.err)
		}
	}
	for _, r := range o.requires {
		if err := wire.ValidateMethodName(r); err != nil {
			return nil, fmt.Errorf("host: %s: Requires: %w", name, err)
		}
		if r == name {
			return nil, fmt.Errorf("host: %s: Requires itself", name)
		}
	}
	return o, nil
}

// objectLike reports whether JSON objects decode into t.
func objectLike(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		return true
	case reflect.Map:
		return t.Key().Kind() == reflect.String
	}
	return false
}

// codeSlot carries a handler's JSON-RPC error code out of the CHP
// boundary, which records the failure but keeps only its message.
type codeSlot struct{ err *jsonrpc.Error }

type codeSlotKey struct{}

// noteCode remembers err's JSON-RPC code (if any) for the direct-call
// answer and returns err unchanged.
func noteCode(ctx context.Context, err error) error {
	slot, _ := ctx.Value(codeSlotKey{}).(*codeSlot)
	if slot == nil {
		return err
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		slot.err = je
	} else if c, ok := jsonrpc.ErrorCode(err); ok {
		slot.err = &jsonrpc.Error{Code: c, Message: err.Error()}
	}
	return err
}
