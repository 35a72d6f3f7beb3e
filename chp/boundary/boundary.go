package boundary

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary/evlog"
	"github.com/capmesh/capmesh/chp/boundary/governance"
	"github.com/capmesh/capmesh/chp/boundary/internal/evjson"
	"github.com/capmesh/capmesh/chp/boundary/internal/replaycache"
	"github.com/capmesh/capmesh/chp/boundary/internal/semver"
	"github.com/capmesh/capmesh/chp/boundary/internal/streamrec"
	"github.com/capmesh/capmesh/chp/boundary/mandates"
	"github.com/capmesh/capmesh/chp/schema"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/tracing"
)

// Handler executes a capability. It receives the invocation payload (a JSON
// object) and returns the result data (any JSON value; nil means null). A
// returned error is a failure outcome (execution_failed), never a denial.
// The invocation's correlation and subject are available through
// InvocationFromContext. Handlers must honour ctx: it carries the
// capability's timeout.
type Handler func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error)

// Capability is a descriptor plus the handler behind it.
type Capability struct {
	Descriptor chp.CapabilityDescriptor
	Handler    Handler
	// Stream, when set, streams the capability's answer in mode "stream"
	// (InvokeStream); Handler may then be nil, and sync mode runs Stream,
	// answering its terminal data. Declare "stream" in Descriptor.Modes.
	Stream StreamHandler
	// Disabled capabilities are registered but skipped (pipeline gate 3).
	Disabled bool
}

// Config configures a Boundary. Zero values take the documented defaults.
type Config struct {
	// HostID is the stable host identity (required).
	HostID string
	// HostVersion is the implementation version (default "capmesh").
	HostVersion string
	// Version is the host descriptor version (default "0.1.0").
	Version string
	// Kind is the host kind (default "local").
	Kind string
	// Store holds the evidence (default: a new in-memory store). The
	// Boundary does not close it.
	Store evidence.Store
	// Key, when set, makes the host signed-tier: exports are signed and the
	// identity document carries the key. Nil = hash-chain tier.
	Key ed25519.PrivateKey
	// Policy is applied at gate 6 (nil = none).
	Policy *governance.PolicyConfig
	// Safety is consulted at gate 10 (nil = no safety gate).
	Safety governance.SafetyEvaluator
	// StrictOutputSchema denies results that violate output_schema instead
	// of recording a warning (gate 12).
	StrictOutputSchema bool
	// Environment is recorded on correlations that carry none ("" = omit).
	Environment string
	// ResultWindow bounds how long recorded results replay by invocation_id
	// (default 24h); ResultCacheSize bounds how many (default 100000; the
	// oldest go first). With a store that keeps results
	// (evidence.ResultStore: logstore, sqlite) they are written beside the
	// evidence and reloaded by New, so replay survives a restart.
	ResultWindow    time.Duration
	ResultCacheSize int
	// MaxReplayLimit caps a replay page (default 10000).
	MaxReplayLimit int
	// TimeoutGrace is how long after a capability's timeout the host waits
	// for a handler that ignores cancellation before recording the outcome
	// as indeterminate (default 1s).
	TimeoutGrace time.Duration
	// Logger receives operational messages (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// RevocationsFile, when set, keeps the mandate revocations the host
	// accepts (AcceptRevocation) in this file, outside the evidence store,
	// and reloads them in New. "" keeps them in memory.
	RevocationsFile string
	// MandateUsesFile, when set, keeps the uses counted against capped
	// mandates (max_invocations) in this file, so a restart does not reset
	// them. "" counts in memory.
	MandateUsesFile string
	// Observer, when set, is told of every invocation's outcome and of
	// each evidence commit, for metrics (package telemetry implements
	// it). Nil costs nothing.
	Observer Observer
	// Tracer, when set, traces every invocation: a span "chp.invoke"
	// (child of the span the context carries), one child per CHP gate
	// passed ("chp.gate.<name>") and per evidence append
	// ("chp.evidence.append"). Nil costs a nil check. Traced or not, the
	// trace id of the span context the invocation's context carries
	// (tracing.FromContext) is recorded as correlation.trace_id when the
	// envelope names none.
	Tracer tracing.Tracer
}

// Observer receives what a Boundary does, for metrics. Its methods are
// called synchronously from many goroutines at once: they must be safe
// for concurrent use, quick, and must not block.
type Observer interface {
	// OnInvocation reports an invocation's recorded outcome; denialCode is
	// the denial's code ("" unless outcome is denied or skipped). Codes
	// may be any string a policy chose: an observer that uses them as
	// labels must bound them (chp.IsReservedCode).
	OnInvocation(outcome chp.Outcome, denialCode string)
	// OnEvidenceCommit reports the final commit of an invocation's
	// evidence: the events appended, the time until they (and the
	// recorded result) were durable, and the error if that failed.
	OnEvidenceCommit(events int, elapsed time.Duration, err error)
}

// Boundary is the CHP capability boundary: every invocation passes through
// its gate pipeline, emits hash-chained evidence into the store, and is
// durable before Invoke returns. It is safe for concurrent use.
type Boundary struct {
	cfg     Config
	store   evidence.Store
	log     *slog.Logger
	now     func() time.Time
	keyID   string
	pubB64  string
	ident   *chp.HostIdentity
	started string

	mu   sync.Mutex                               // serializes Register
	caps atomic.Pointer[map[string][]*registered] // by id, sorted by version; copied on write, read without a lock

	stripes [64]sync.Mutex // autonomy check-and-start, by correlation

	results  *replaycache.Cache
	rstore   evidence.ResultStore // the store, when it keeps results durably
	hostStr  []byte               // the host id as a chp-stable-v1 string
	subjects evjson.SubjectCache
	mandates *mandates.State // gate 5: revocations held, uses counted
	streams  streamrec.Cache // recorded chunks of streamed invocations

	// The evidence log's read side — Replay, Verify, Export, the store
	// heads, the Merkle log and its proofs, witness statements and
	// anchors — is package evlog's, its methods promoted to the Boundary.
	*evidenceLog
}

// evidenceLog names the embedded evlog.Log without exporting the field.
type evidenceLog = evlog.Log

type registered struct {
	desc     chp.CapabilityDescriptor
	uri      string // desc.URI(), computed once
	handler  Handler
	stream   StreamHandler
	enabled  atomic.Bool
	input    *schema.Payload
	output   *schema.Payload
	checkers []governance.Invariant
}

// New validates cfg and returns a Boundary.
func New(cfg Config) (*Boundary, error) {
	if strings.TrimSpace(cfg.HostID) == "" {
		return nil, errors.New("boundary: Config.HostID is required")
	}
	if !utf8.ValidString(cfg.HostID) {
		return nil, errors.New("boundary: Config.HostID must be valid UTF-8")
	}
	if cfg.HostVersion == "" {
		cfg.HostVersion = "capmesh"
	}
	if cfg.Version == "" {
		cfg.Version = "0.1.0"
	}
	if cfg.Kind == "" {
		cfg.Kind = "local"
	}
	if cfg.Store == nil {
		cfg.Store = evidence.NewMemory()
	}
	if cfg.ResultWindow <= 0 {
		cfg.ResultWindow = 24 * time.Hour
	}
	if cfg.ResultCacheSize <= 0 {
		cfg.ResultCacheSize = 100000
	}
	if cfg.MaxReplayLimit <= 0 {
		cfg.MaxReplayLimit = 10000
	}
	if cfg.TimeoutGrace <= 0 {
		cfg.TimeoutGrace = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Policy != nil {
		p := *cfg.Policy
		if err := p.Compile(); err != nil {
			return nil, fmt.Errorf("boundary: %w", err)
		}
		cfg.Policy = &p
	}
	if cfg.Key != nil && len(cfg.Key) != ed25519.PrivateKeySize {
		return nil, errors.New("boundary: Config.Key is not an ed25519 private key")
	}
	b := &Boundary{
		cfg: cfg, store: cfg.Store, log: cfg.Logger, now: cfg.Now,
		results: replaycache.New(cfg.ResultCacheSize, cfg.ResultWindow, cfg.Now),
		started: chp.FormatTime(cfg.Now()),
		hostStr: canonical.AppendChpStableString(nil, cfg.HostID),
	}
	b.evidenceLog = evlog.New(evlog.Config{HostID: cfg.HostID, Key: cfg.Key, Store: cfg.Store, Now: cfg.Now,
		MaxReplayLimit: cfg.MaxReplayLimit, HeldRevocations: b.RevocationIDs})
	b.caps.Store(&map[string][]*registered{})
	if rs, ok := cfg.Store.(evidence.ResultStore); ok {
		b.rstore = rs
		n, err := b.results.Load(context.Background(), rs)
		if err != nil {
			return nil, fmt.Errorf("boundary: loading recorded results: %w", err)
		}
		if n > 0 {
			b.log.Debug("idempotent-replay cache refilled from the evidence store", "results", n, "store", cfg.Store.Name())
		}
	}
	ms, err := mandates.Open(mandates.Config{RevocationsFile: cfg.RevocationsFile, UsesFile: cfg.MandateUsesFile,
		Now: cfg.Now(), Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("boundary: %w", err)
	}
	b.mandates = ms
	if cfg.Key != nil {
		pub := cfg.Key.Public().(ed25519.PublicKey)
		b.keyID = chp.KeyID(pub)
		b.pubB64 = base64.StdEncoding.EncodeToString(pub)
		hi, err := chp.NewHostIdentity(cfg.HostID, cfg.Key, b.started)
		if err != nil {
			return nil, err
		}
		b.ident = hi
	}
	return b, nil
}

// Register adds a capability. The descriptor is completed with defaults
// (modes [sync], the core emits, S1 assurance) and its schemas and
// invariants are compiled now, so a bad declaration fails here, not at
// invocation time.
func (b *Boundary) Register(c Capability) error {
	d := c.Descriptor
	var err error
	if strings.TrimSpace(d.ID) == "" || strings.TrimSpace(d.Version) == "" {
		return errors.New("boundary: capability id and version are required")
	}
	if c.Handler == nil && c.Stream != nil {
		c.Handler = collect(c.Stream)
	}
	if c.Handler == nil {
		return fmt.Errorf("boundary: capability %s has no handler", d.URI())
	}
	if len(d.Modes) == 0 {
		d.Modes = []string{"sync"}
	}
	if d.Emits == nil {
		d.Emits = []string{chp.EventStarted, chp.EventCompleted, chp.EventFailed, chp.EventDenied}
	}
	if d.Invariants == nil {
		d.Invariants = []chp.InvariantDescriptor{}
	}
	if d.Tags == nil {
		d.Tags = []string{}
	}
	if d.Assurance == nil {
		a := chp.DefaultAssurance()
		d.Assurance = &a
	}
	if d.Idempotency == "" {
		d.Idempotency = "optional"
	}
	if d.Risk != "" {
		if !governance.ValidRisk(d.Risk) {
			return fmt.Errorf("boundary: capability %s: risk %q: want low, medium, high or critical", d.URI(), d.Risk)
		}
	}
	d.CapabilityURI = d.URI()
	if !utf8.ValidString(d.ID) || !utf8.ValidString(d.Version) {
		return errors.New("boundary: capability id and version must be valid UTF-8")
	}
	// A disabled mark in the descriptor (any form Disabled reads) disables
	// the capability; the live state is emitted by wireDescriptor, so the
	// marks are dropped here.
	disabled := c.Disabled || d.Disabled()
	if strings.EqualFold(d.Status, "disabled") {
		d.Status = ""
	}
	if d.Status != "" && !slices.Contains(statuses, d.Status) {
		return fmt.Errorf("boundary: capability %s: status %q: want one of %s", d.URI(), d.Status, strings.Join(statuses, ", "))
	}
	d.Enabled = nil
	if d.Metadata, err = withoutMember(d.Metadata, chp.EnabledKey); err != nil {
		return fmt.Errorf("boundary: capability %s: metadata: %w", d.URI(), err)
	}
	r := &registered{desc: d, uri: d.URI(), handler: c.Handler, stream: c.Stream}
	r.enabled.Store(!disabled)
	if r.input, err = schema.CompilePayload(schema.PayloadURL(d.ID, d.Version, "input"), d.InputSchema); err != nil {
		return fmt.Errorf("boundary: capability %s: input_schema: %w", d.URI(), err)
	}
	if r.output, err = schema.CompilePayload(schema.PayloadURL(d.ID, d.Version, "output"), d.OutputSchema); err != nil {
		return fmt.Errorf("boundary: capability %s: output_schema: %w", d.URI(), err)
	}
	for i := range d.Invariants {
		inv := &d.Invariants[i]
		if inv.Enforcement == "" {
			inv.Enforcement = "declarative"
		}
		if inv.FailureBehavior == "" {
			inv.FailureBehavior = "deny"
		}
		if isNull(inv.Parameters) {
			inv.Parameters = json.RawMessage("{}")
		}
		if inv.Enforcement != "host" {
			continue
		}
		chk, err := governance.CompileInvariant(inv)
		if err != nil {
			return fmt.Errorf("boundary: capability %s: invariant %q: %w", d.URI(), inv.ID, err)
		}
		r.checkers = append(r.checkers, chk)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	old := *b.caps.Load()
	for _, o := range old[d.ID] {
		if o.desc.Version == d.Version {
			return fmt.Errorf("boundary: capability %s already registered", d.URI())
		}
	}
	caps := make(map[string][]*registered, len(old)+1)
	for id, l := range old {
		caps[id] = l
	}
	list := append(slices.Clone(old[d.ID]), r)
	sort.Slice(list, func(i, j int) bool { return list[i].desc.Version < list[j].desc.Version })
	caps[d.ID] = list
	b.caps.Store(&caps)
	return nil
}

// SetEnabled enables or disables a registered capability. A disabled one
// stays registered and discoverable, marked disabled (see Capabilities);
// invoking it is skipped (gate 3).
func (b *Boundary) SetEnabled(id, version string, enabled bool) error {
	for _, r := range (*b.caps.Load())[id] {
		if r.desc.Version == version {
			r.enabled.Store(enabled)
			return nil
		}
	}
	return fmt.Errorf("boundary: capability %s:%s not registered", id, version)
}

// Capabilities returns the registered descriptors in id order, as emitted
// on the wire: autonomy moved under metadata.autonomy and a disabled
// capability marked metadata[EnabledKey] = false, as of this call (SetEnabled
// changes what the next call returns).
func (b *Boundary) Capabilities() []chp.CapabilityDescriptor {
	caps := *b.caps.Load()
	ids := make([]string, 0, len(caps))
	for id := range caps {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := []chp.CapabilityDescriptor{}
	for _, id := range ids {
		for _, r := range caps[id] {
			out = append(out, wireDescriptor(r.desc, r.enabled.Load()))
		}
	}
	return out
}

// statuses are the schema's capability maturity levels.
var statuses = []string{"draft", "experimental", "certified", "deprecated"}

// wireDescriptor moves autonomy into metadata — the descriptor schema has
// no autonomy member — and marks a disabled capability with
// metadata[EnabledKey] = false (docs/DECISIONS.md).
func wireDescriptor(d chp.CapabilityDescriptor, enabled bool) chp.CapabilityDescriptor {
	if d.Autonomy == nil && enabled {
		if isNull(d.Metadata) {
			d.Metadata = json.RawMessage("{}")
		}
		return d
	}
	meta := map[string]json.RawMessage{}
	if !isNull(d.Metadata) {
		_ = json.Unmarshal(d.Metadata, &meta)
	}
	if d.Autonomy != nil {
		a, _ := json.Marshal(d.Autonomy)
		meta["autonomy"] = a
		d.Autonomy = nil
	}
	if !enabled {
		meta[chp.EnabledKey] = json.RawMessage("false")
	}
	d.Metadata, _ = json.Marshal(meta)
	return d
}

// withoutMember returns the JSON object obj without its member key (obj
// itself when it has none; null stays null).
func withoutMember(obj json.RawMessage, key string) (json.RawMessage, error) {
	if isNull(obj) {
		return obj, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		return nil, fmt.Errorf("must be a JSON object: %w", err)
	}
	if _, ok := m[key]; !ok {
		return obj, nil
	}
	delete(m, key)
	return json.Marshal(m)
}

// Assurance is the tier the host declares.
func (b *Boundary) Assurance() string {
	if b.cfg.Key != nil {
		return "signed"
	}
	return "hash-chain"
}

// HostID returns the configured host id.
func (b *Boundary) HostID() string { return b.cfg.HostID }

// HostVersion returns the configured implementation version.
func (b *Boundary) HostVersion() string { return b.cfg.HostVersion }

// Logger returns the logger operational messages go to; a binding logs its
// own failures there too.
func (b *Boundary) Logger() *slog.Logger { return b.log }

// Has reports whether a capability with this id is registered (at any
// version).
func (b *Boundary) Has(id string) bool {
	_, ok := (*b.caps.Load())[id]
	return ok
}

// Describe returns the host descriptor (chp-v0.1.md §4).
func (b *Boundary) Describe() *chp.HostDescriptor {
	return &chp.HostDescriptor{
		Assurance:         b.Assurance(),
		Capabilities:      b.Capabilities(),
		Evidence:          chp.EvidenceStoreInfo{AppendOnly: true, Store: b.store.Name()},
		HostIdentity:      b.ident,
		HostVersion:       b.cfg.HostVersion,
		ID:                b.cfg.HostID,
		KeyID:             b.keyID,
		Kind:              b.cfg.Kind,
		Metadata:          json.RawMessage("{}"),
		ProtocolVersion:   chp.ProtocolVersion,
		PublicKey:         b.pubB64,
		SupportedVersions: slices.Clone(chp.SupportedVersions),
		Version:           b.cfg.Version,
	}
}

// Identity returns the public identity document (chp-v0.2.md §3.1).
func (b *Boundary) Identity() *chp.IdentityDocument {
	return &chp.IdentityDocument{Assurance: b.Assurance(), HostIdentity: b.ident, KeyID: b.keyID, PublicKey: b.pubB64}
}

// resolve implements gate 2: by the exact version when one is named, else
// the single registered version — or, with a requested version range, the
// highest registered version satisfying it (chp-v0.2.md §1).
func (b *Boundary) resolve(id string, version, rng *string) (*registered, *chp.DenialReason) {
	caps := *b.caps.Load()
	list := caps[id]
	if rng != nil && strings.TrimSpace(*rng) != "" && len(list) > 0 {
		return b.resolveRange(id, list, version, *rng)
	}
	if version != nil && *version != "" {
		for _, r := range list {
			if r.desc.Version == *version {
				return r, nil
			}
		}
		if len(list) > 0 {
			return nil, b.denial(chp.CodeCapabilityNotFound, fmt.Sprintf("Capability not found: %s:%s", id, *version),
				map[string]any{"available": versions(list), "hint": "GET /capabilities lists every registered capability"})
		}
	} else if len(list) == 1 {
		return list[0], nil
	} else if len(list) > 1 {
		return nil, b.denial(chp.CodeCapabilityNotFound, fmt.Sprintf("Capability %s is registered in several versions; name one", id),
			map[string]any{"available": versions(list), "hint": "set the envelope's version"})
	}
	var sugg []any
	prefix, _, _ := strings.Cut(id, ".")
	for other := range caps {
		if prefix != "" && strings.HasPrefix(other, prefix+".") && len(sugg) < 5 {
			sugg = append(sugg, other)
		}
	}
	sort.Slice(sugg, func(i, j int) bool { return sugg[i].(string) < sugg[j].(string) })
	if sugg == nil {
		sugg = []any{}
	}
	return nil, b.denial(chp.CodeCapabilityNotFound, "Capability not found: "+id,
		map[string]any{"hint": "GET /capabilities lists every registered capability", "suggestions": sugg})
}

// resolveRange resolves id (registered in list) by a requested version
// range: the highest registered version that satisfies it (and equals
// version, when one is named too). An invalid range, or none satisfying it,
// is capability_version_unsupported.
func (b *Boundary) resolveRange(id string, list []*registered, version *string, rng string) (*registered, *chp.DenialReason) {
	r, err := semver.ParseRange(rng)
	if err != nil {
		return nil, b.denial(chp.CodeCapabilityVersionUnsupported, fmt.Sprintf("requested_capability_version %q is not a valid semver range: %v", rng, err),
			map[string]any{"requested": rng, "available": versions(list)})
	}
	var best *registered
	var bestV semver.Version
	for _, c := range list {
		if version != nil && *version != "" && c.desc.Version != *version {
			continue
		}
		v, err := semver.Parse(c.desc.Version)
		if err != nil || !r.SatisfiedBy(v) {
			continue
		}
		if best == nil || v.Compare(bestV) > 0 {
			best, bestV = c, v
		}
	}
	if best == nil {
		return nil, b.denial(chp.CodeCapabilityVersionUnsupported, fmt.Sprintf("no registered version of %s satisfies %q", id, rng),
			map[string]any{"requested": rng, "available": versions(list)})
	}
	return best, nil
}

func versions(list []*registered) []any {
	out := make([]any, len(list))
	for i, r := range list {
		out[i] = r.desc.Version
	}
	return out
}

// denial builds a DenialReason with the normative retryable value.
func (b *Boundary) denial(code, msg string, details map[string]any) *chp.DenialReason {
	d := &chp.DenialReason{Code: code, Message: msg, Retryable: chp.Retryable(code), Details: json.RawMessage("{}")}
	if details != nil {
		d.Details, _ = json.Marshal(details)
	}
	return d
}

func (b *Boundary) stripe(corr string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(corr))
	return &b.stripes[h.Sum32()%uint32(len(b.stripes))]
}

// isNull reports whether r is absent or JSON null.
func isNull(r json.RawMessage) bool {
	r = bytes.TrimSpace(r)
	return len(r) == 0 || string(r) == "null"
}
