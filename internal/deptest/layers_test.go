package deptest

// A layer is a row of DESIGN.md's layout; a package may import packages of
// its own layer or below, never above.
type layer int

const (
	// foundation: protocol objects and transports everything else builds
	// on — chp, jsonrpc, endpoint, btsp, canonical, identity — and small
	// internal helpers.
	foundation layer = iota
	// mechanism: what a host or node is made of — the CHP boundary and its
	// bindings, wire, evidence stores, fingerprints, merkle, access.
	mechanism
	// service: the libraries a program assembles — host, registry,
	// conformance, compose, dashboard, mcpbridge, telemetry.
	service
	// nodeLayer: package node, which assembles a whole node.
	nodeLayer
	// program: commands, examples and benchmarks; nothing imports them.
	program
)

func (l layer) String() string {
	return [...]string{"foundation", "mechanism", "service", "node", "program"}[l]
}

// layers assigns every package of the module, by import path below the
// module path, a layer. Entries for packages DESIGN.md plans but that do
// not exist yet are allowed, so that the work adding them finds its row.
var layers = map[string]layer{
	"canonical":                 foundation,
	"canonical/collate":         foundation,
	"chp":                       foundation,
	"chp/witnessing":            foundation,
	"jsonrpc":                   foundation,
	"endpoint":                  foundation,
	"btsp":                      foundation,
	"identity":                  foundation,
	"internal/xdg":              foundation,
	"internal/interleave":       foundation,
	"internal/specdata":         foundation,
	"tracing":                   foundation,
	"internal/errcatalog":       foundation,
	"internal/etcdtest":         foundation,
	"internal/nettest":          foundation,
	"internal/logbuf":           foundation,
	"jsonrpc/internal/jsontext": foundation,
	"canonical/govalue":         foundation,
	"canonical/pydantic":        foundation,

	"jsonrpc/channel":             foundation,
	"jsonrpc/jhttp":               foundation,
	"jsonrpc/internal/connbudget": foundation,
	"jsonrpc/internal/outbox":     foundation,
	"jsonrpc/internal/spectest":   foundation,
	"jsonrpc/internal/workers":    foundation,
	"jsonrpc/internal/sysconn":    foundation,

	"chp/boundary":                      mechanism,
	"chp/boundary/internal/replaycache": mechanism,
	"chp/boundary/evlog":                mechanism,
	"chp/boundary/governance":           mechanism,
	"chp/boundary/internal/evjson":      mechanism,
	"chp/boundary/internal/invtrace":    mechanism,
	"chp/boundary/internal/semver":      mechanism,
	"chp/boundary/internal/streamrec":   mechanism,
	"chp/boundary/mandates":             mechanism,
	"chp/schema":                        mechanism,
	"chp/chphttp":                       mechanism,
	"chp/chprpc":                        mechanism,
	"chp/gateway":                       mechanism,
	"wire":                              mechanism,
	"evidence":                          mechanism,
	"evidence/logstore":                 mechanism,
	"evidence/logstore/internal/format": mechanism,
	"evidence/logstore/internal/packed": mechanism,
	"evidence/sqlite":                   mechanism,
	"evidence/postgres":                 mechanism,
	"evidence/postgres/pgtest":          mechanism,
	"evidence/storetest":                mechanism,
	"evidence/internal/groupcommit":     mechanism,
	"evidence/internal/hexpack":         mechanism,
	"registry/descriptor":               mechanism,
	"registry/internal/pyjson":          mechanism,
	"registry/internal/refusal":         mechanism,
	"registry/internal/signed":          mechanism,
	"registry/internal/state":           mechanism,
	"registry/store":                    mechanism,
	"fingerprint":                       mechanism,
	"merkle":                            mechanism,
	"access":                            mechanism,

	"host":                 service,
	"registry":             service,
	"registry/announce":    service,
	"registry/api":         service,
	"registry/sqlite":      service,
	"registry/etcd":        service,
	"registry/storetest":   service,
	"conformance":          service,
	"conformance/fakehost": service,
	"conformance/framing":  service,
	"compose":              service,
	"dashboard":            service,
	"mcpbridge":            service,
	"telemetry":            service,

	"node": nodeLayer,

	"cmd/capmesh":                      program,
	"cmd/capmesh/internal/cli":         program,
	"cmd/capmesh/internal/auditcmd":    program,
	"cmd/capmesh/internal/callcmd":     program,
	"cmd/capmesh/internal/evidencecmd": program,
	"cmd/capmesh/internal/hashcmd":     program,
	"cmd/capmesh/internal/keyscmd":     program,
	"cmd/capmesh/internal/mcpcmd":      program,
	"cmd/capmesh/internal/registrycmd": program,
	"examples/kvhost":                  program,
	"examples/kvhost/kv":               program,
	"internal/bench":                   program,
	"internal/bench/ratios":            program,
	"internal/deptest":                 program,
	"internal/errcatalog/gen":          program,
	"internal/abuse":                   program,

	"internal/fleettest": program,

	"internal/docstest":              program,
	"canonical/collate/internal/gen": program,
}

// slim are the foundations every consumer links, and the evidence log's
// read side (the proofs a verifier checks): none may pull in a heavy
// dependency.
var slim = []string{"chp", "chp/witnessing", "identity", "wire", "jsonrpc", "jsonrpc/jhttp", "jsonrpc/channel", "canonical", "canonical/govalue", "canonical/pydantic", "chp/boundary/evlog", "tracing"}

// verifier are the pure protocol packages a bundle or witness verifier
// links: TestVerifierIsPure holds them to chpAllowed (and each other).
var verifier = []string{"chp", "chp/witnessing"}

// heavy are dependencies that must stay out of the slim packages, by
// import path prefix, with what they are.
var heavy = []struct{ prefix, what string }{
	{"github.com/google/cel-go/", "CEL"},
	{"cel.dev/expr", "CEL"},
	{"google.golang.org/protobuf/", "protobuf"},
	{"github.com/golang/protobuf/", "protobuf"},
	{"google.golang.org/genproto/", "protobuf"},
	{"github.com/antlr4-go/antlr/", "ANTLR"},
	{"github.com/antlr/antlr4/", "ANTLR"},
	{"modernc.org/", "SQLite (modernc)"},
	{"github.com/mattn/go-sqlite3", "SQLite (cgo)"},
	{"go.etcd.io/", "etcd"},
	{"github.com/jackc/", "PostgreSQL (pgx)"},
	{"github.com/lib/pq", "PostgreSQL (pq)"},
	{"go.opentelemetry.io/otel/sdk", "the OpenTelemetry SDK"},
	{"github.com/prometheus/", "Prometheus"},
	{"github.com/santhosh-tekuri/jsonschema/", "a JSON Schema validator"},
	{"github.com/google/jsonschema-go/", "a JSON Schema validator"},
}

// chpAllowed are the only packages outside the standard library the pure
// protocol package chp may depend on: canonical, identity (and what those
// need), and Ed25519 arithmetic (edwards25519, curve25519-voi).
var chpAllowed = []string{"canonical", "canonical/collate", "canonical/govalue", "identity", "internal/xdg", "filippo.io/edwards25519", "github.com/oasisprotocol/curve25519-voi"}

// hostForbidden are what the host library must not pull in, besides the
// heavy dependencies of a node's distributed backends and dashboards.
var hostForbidden = []struct{ prefix, what string }{
	{"go.etcd.io/", "etcd"},
	{"github.com/jackc/", "PostgreSQL (pgx)"},
	{"github.com/lib/pq", "PostgreSQL (pq)"},
	{"go.opentelemetry.io/otel/sdk", "the OpenTelemetry SDK"},
	{"github.com/prometheus/", "Prometheus"},
	{"$module/dashboard", "the dashboard"},
	{"$module/telemetry", "the telemetry wiring"},
	{"github.com/modelcontextprotocol/", "the MCP Go SDK"},
	{"$module/mcpbridge", "the MCP bridge"},
}

// plainHost are the packages a plain capability host links (the host
// library and what it is made of): tracing reaches them through the
// stdlib-only hook of package tracing, so none may link OpenTelemetry —
// not its SDK, its exporters or their gRPC and protobuf, and not even its
// API. A host opts in by importing telemetry itself.
var plainHost = []string{"host", "chp/boundary", "chp/chprpc", "chp/chphttp", "jsonrpc", "tracing", "access", "evidence", "evidence/logstore", "registry/announce"}

// otelForbidden are what no plainHost package may depend on.
var otelForbidden = []struct{ prefix, what string }{
	{"go.opentelemetry.io/otel/sdk", "the OpenTelemetry SDK"},
	{"go.opentelemetry.io/otel/exporters/", "an OpenTelemetry exporter"},
	{"go.opentelemetry.io/", "OpenTelemetry"},
	{"google.golang.org/grpc", "gRPC"},
	{"github.com/grpc-ecosystem/", "gRPC"},
}
