package telemetry

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/internal/errcatalog"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
)

// Other is the label value standing for every method name, denial code or
// other value outside a label's bounded set.
const Other = "other"

// DefaultMaxMethods bounds the method names labelled by name.
const DefaultMaxMethods = 256

// Options configures Metrics. The zero value is the default.
type Options struct {
	// Methods are method names labelled by name from the start (a host's
	// registered methods). Others earn a label by succeeding once.
	Methods []string
	// MaxMethods bounds the method names labelled by name; past it every
	// further name is Other. Default DefaultMaxMethods.
	MaxMethods int
	// NoRuntime leaves out the Go runtime and process collectors.
	NoRuntime bool
}

// Metrics is a private Prometheus registry with capmesh's collectors, and
// the observers that feed them. It is safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
	conns    *prometheus.GaugeVec
	accepted *prometheus.CounterVec
	refused  *prometheus.CounterVec

	invocations *prometheus.CounterVec
	denials     *prometheus.CounterVec
	commitTime  prometheus.Histogram
	commitSize  prometheus.Histogram
	storeErrors *prometheus.CounterVec

	changes *prometheus.CounterVec
	trust   *prometheus.CounterVec
	routes  *prometheus.CounterVec
	hops    prometheus.Histogram
	limited *prometheus.CounterVec

	methods    sync.Map // name → *methodSeries: the names labelled by name
	other      *methodSeries
	nmethods   atomic.Int64
	maxMethods int64

	regMu      sync.Mutex
	registries []*registry.Node
}

// New returns Metrics with every capmesh series registered on a new
// private registry (never the global one).
func New(opts Options) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), maxMethods: int64(opts.MaxMethods)}
	if m.maxMethods <= 0 {
		m.maxMethods = DefaultMaxMethods
	}
	m.other = &methodSeries{label: Other}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capmesh_rpc_requests_total",
		Help: "JSON-RPC requests answered, by method (registered names; other for the rest) and outcome (ok, or the error catalog's word for the code sent; application_error outside the catalog).",
	}, []string{"method", "outcome"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "capmesh_rpc_request_duration_seconds",
		Help:    "Time JSON-RPC handlers took, by method.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"method"})
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "capmesh_rpc_requests_in_flight",
		Help: "JSON-RPC handlers running now.",
	})
	m.conns = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "capmesh_rpc_connections",
		Help: "Open connections holding a slot of the connection budget, by listener transport (unix, tcp, http).",
	}, []string{"transport"})
	m.accepted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capmesh_rpc_connections_accepted_total",
		Help: "Connections admitted, by listener transport.",
	}, []string{"transport"})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capmesh_rpc_limit_refusals_total",
		Help: "Work refused by a server limit, by reason (max_conns, message_too_large, line_timeout, reply_too_large).",
	}, []string{"reason"})
	m.invocations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capmesh_chp_invocations_total",
		Help: "CHP invocations recorded by the boundary, by outcome (success, failure, denied, skipped, indeterminate).",
	}, []string{"outcome"})
	m.denials = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capmesh_chp_denials_total",
		Help: "CHP denials and skips, by denial code (the reserved codes; other for the rest).",
	}, []string{"code"})
	m.commitTime = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "capmesh_evidence_commit_duration_seconds",
		Help:    "Time from an invocation's final evidence append until it and its result were durable.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	})
	m.commitSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "capmesh_evidence_commit_events",
		Help:    "Evidence events appended by an invocation's final commit.",
		Buckets: []float64{1, 2, 3, 4, 6, 8, 16, 32},
	})
	m.storeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capmesh_store_errors_total",
		Help: "Failed store operations, by store (evidence, registry) and operation (commit; apply, list, purge).",
	}, []string{"store", "op"})
	m.changes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capmesh_registry_changes_total",
		Help: "Registry changes committed, by kind (registered, replaced, expired, revoked, deregistered).",
	}, []string{"kind"})
	m.trust = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capmesh_registry_trust_changes_total",
		Help: "Changes of the network's trust state, by kind (enrolled, revoked).",
	}, []string{"kind"})
	m.routes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capmesh_router_calls_total",
		Help: "Calls the router handled, by outcome (ok, provider_error, no_provider, refused, unreachable).",
	}, []string{"outcome"})
	m.hops = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "capmesh_router_hops",
		Help:    "Hop count (params._meta.hops) of the calls the router forwarded.",
		Buckets: []float64{1, 2, 3, 4, 5, 6, 8},
	})
	m.limited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capmesh_registry_rate_limited_total",
		Help: "HTTP registry writes refused by a per-client rate limit (429), by group (agents, join, admin).",
	}, []string{"group"})
	m.reg.MustRegister(m.limited, m.requests, m.duration, m.inFlight, m.conns, m.accepted, m.refused,
		m.invocations, m.denials, m.commitTime, m.commitSize, m.storeErrors,
		m.changes, m.trust, m.routes, m.hops, &sizeCollector{m})
	if !opts.NoRuntime {
		m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	m.prime()
	m.AddMethods(opts.Methods...)
	return m
}

// prime creates the series of the bounded label sets at zero, so that a
// scrape shows them before the first event (rate() needs the zero).
func (m *Metrics) prime() {
	for _, t := range []string{"unix", "tcp", "http"} {
		m.conns.WithLabelValues(t)
		m.accepted.WithLabelValues(t)
	}
	for _, r := range []string{jsonrpc.RefusedMaxConns, jsonrpc.RefusedMessageTooLarge, jsonrpc.RefusedLineTimeout, jsonrpc.RefusedReplyTooLarge} {
		m.refused.WithLabelValues(r)
	}
	for _, o := range []chp.Outcome{chp.OutcomeSuccess, chp.OutcomeFailure, chp.OutcomeDenied, chp.OutcomeSkipped, chp.OutcomeIndeterminate} {
		m.invocations.WithLabelValues(string(o))
	}
	for _, op := range []string{"commit"} {
		m.storeErrors.WithLabelValues("evidence", op)
	}
	for _, op := range []string{"apply", "list", "purge"} {
		m.storeErrors.WithLabelValues("registry", op)
	}
	for _, k := range []string{registry.EventRegistered, registry.EventReplaced, registry.EventExpired, registry.EventRevoked, registry.EventDeregistered} {
		m.changes.WithLabelValues(k)
	}
	for _, k := range []string{"enrolled", "revoked"} {
		m.trust.WithLabelValues(k)
	}
	for _, g := range []string{"agents", "join", "admin"} {
		m.limited.WithLabelValues(g)
	}
	for _, o := range []string{registry.RouteOK, registry.RouteProviderError, registry.RouteNoProvider, registry.RouteRefused, registry.RouteUnreachable} {
		m.routes.WithLabelValues(o)
	}
}

// Registry returns the private Prometheus registry, to add a program's
// own collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the exposition (text or OpenMetrics, as negotiated).
// Mount it with host.MountHTTPKeyed so that the host's access policy
// guards it.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{MaxRequestsInFlight: 4})
}

// RPC returns the observer for jsonrpc.ServerOptions.Observer.
func (m *Metrics) RPC() jsonrpc.Observer { return rpcObserver{m} }

// CHP returns the observer for boundary.Config.Observer.
func (m *Metrics) CHP() boundary.Observer { return chpObserver{m} }

// RegistryObserver returns the observer for registry.Config.Observer.
func (m *Metrics) RegistryObserver() registry.Observer { return registryObserver{m} }

// WatchRegistry adds n's size to the exposition (read at scrape time).
func (m *Metrics) WatchRegistry(n *registry.Node) {
	m.regMu.Lock()
	m.registries = append(m.registries, n)
	m.regMu.Unlock()
}

// AddMethods labels these method names by name from now on (within
// MaxMethods): a program's registered methods, once it knows them.
func (m *Metrics) AddMethods(names ...string) {
	for _, name := range names {
		m.admit(name)
	}
}

// methodSeries are the series of one method label, looked up once: the
// common path (a success) costs no label hashing.
type methodSeries struct {
	label string
	once  sync.Once
	ok    prometheus.Counter
	dur   prometheus.Observer
}

func (s *methodSeries) init(m *Metrics) *methodSeries {
	s.once.Do(func() {
		s.ok = m.requests.WithLabelValues(s.label, "ok")
		s.dur = m.duration.WithLabelValues(s.label)
	})
	return s
}

// admit labels name by name unless MaxMethods names already are, and
// returns its series (nil when not admitted).
func (m *Metrics) admit(name string) *methodSeries {
	if s, ok := m.methods.Load(name); ok {
		return s.(*methodSeries)
	}
	if m.nmethods.Add(1) > m.maxMethods {
		m.nmethods.Add(-1)
		return nil
	}
	s, loaded := m.methods.LoadOrStore(name, &methodSeries{label: name})
	if loaded {
		m.nmethods.Add(-1)
	}
	return s.(*methodSeries)
}

// series are the series of a finished call to method with code: its
// name's once the name is admitted — registered through Options.Methods
// or AddMethods, or by a call that succeeded — else Other's, so that
// callers cannot mint series with made-up names.
func (m *Metrics) series(method string, code jsonrpc.Code) *methodSeries {
	if method == "" {
		return m.other.init(m)
	}
	if s, ok := m.methods.Load(method); ok {
		return s.(*methodSeries).init(m)
	}
	if code == 0 {
		if s := m.admit(method); s != nil {
			return s.init(m)
		}
	}
	return m.other.init(m)
}

// outcome is the bounded outcome label of a JSON-RPC error code.
func outcome(code jsonrpc.Code) string {
	if code == 0 {
		return "ok"
	}
	if e, ok := errcatalog.Lookup(int(code)); ok {
		return e.Word
	}
	return "application_error"
}

type rpcObserver struct{ m *Metrics }

func (o rpcObserver) OnRequest(method string, code jsonrpc.Code, elapsed time.Duration) {
	s := o.m.series(method, code)
	if code == 0 {
		s.ok.Inc()
	} else {
		o.m.requests.WithLabelValues(s.label, outcome(code)).Inc()
	}
	if method != "" {
		s.dur.Observe(elapsed.Seconds())
	}
}

func (o rpcObserver) OnInFlight(delta int) { o.m.inFlight.Add(float64(delta)) }

func (o rpcObserver) OnConn(transport string, delta int) {
	switch transport {
	case "unix", "tcp", "http":
	default:
		transport = Other
	}
	o.m.conns.WithLabelValues(transport).Add(float64(delta))
	if delta > 0 {
		o.m.accepted.WithLabelValues(transport).Inc()
	}
}

func (o rpcObserver) OnRefused(reason string) { o.m.refused.WithLabelValues(reason).Inc() }

type chpObserver struct{ m *Metrics }

func (o chpObserver) OnInvocation(out chp.Outcome, code string) {
	o.m.invocations.WithLabelValues(string(out)).Inc()
	if code == "" {
		return
	}
	if !chp.IsReservedCode(code) && code != chp.CodeIdempotencyConflict {
		code = Other
	}
	o.m.denials.WithLabelValues(code).Inc()
}

func (o chpObserver) OnEvidenceCommit(events int, elapsed time.Duration, err error) {
	if err != nil {
		o.m.storeErrors.WithLabelValues("evidence", "commit").Inc()
		return
	}
	o.m.commitTime.Observe(elapsed.Seconds())
	o.m.commitSize.Observe(float64(events))
}

type registryObserver struct{ m *Metrics }

func (o registryObserver) OnChange(kind string) { o.m.changes.WithLabelValues(kind).Inc() }

func (o registryObserver) OnTrustChange(kind string) { o.m.trust.WithLabelValues(kind).Inc() }

func (o registryObserver) OnRoute(outcome string, hops int) {
	o.m.routes.WithLabelValues(outcome).Inc()
	if hops > 0 {
		o.m.hops.Observe(float64(hops))
	}
}

func (o registryObserver) OnRateLimited(group string) { o.m.limited.WithLabelValues(group).Inc() }

func (o registryObserver) OnStoreError(op string) {
	o.m.storeErrors.WithLabelValues("registry", op).Inc()
}

// sizeCollector reads the watched registries' sizes at scrape time.
type sizeCollector struct{ m *Metrics }

var (
	entriesDesc = prometheus.NewDesc("capmesh_registry_entries", "Registrations the registry holds.", nil, nil)
	capsDesc    = prometheus.NewDesc("capmesh_registry_capabilities", "Distinct capability tags the registrations offer.", nil, nil)
	revDesc     = prometheus.NewDesc("capmesh_registry_revision", "The registry's version: the revision of its last change.", nil, nil)
)

func (c *sizeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- entriesDesc
	ch <- capsDesc
	ch <- revDesc
}

func (c *sizeCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.regMu.Lock()
	regs := append([]*registry.Node(nil), c.m.registries...)
	c.m.regMu.Unlock()
	var total registry.Size
	for _, n := range regs {
		s := n.Size()
		total.Entries += s.Entries
		total.Capabilities += s.Capabilities
		total.Revision = max(total.Revision, s.Revision)
	}
	if len(regs) == 0 {
		return
	}
	ch <- prometheus.MustNewConstMetric(entriesDesc, prometheus.GaugeValue, float64(total.Entries))
	ch <- prometheus.MustNewConstMetric(capsDesc, prometheus.GaugeValue, float64(total.Capabilities))
	ch <- prometheus.MustNewConstMetric(revDesc, prometheus.GaugeValue, float64(total.Revision))
}
