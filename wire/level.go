package wire

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Call is the observed outcome of one live JSON-RPC call: a result, or an
// error (a JSON-RPC error object, a timeout, a broken connection).
type Call struct {
	Result json.RawMessage
	Err    error
}

// Probe holds what a live check of a host observed, for the requirements a
// captured capabilities.list cannot settle. A nil *Probe, or a nil field,
// means "not observed": Level then reports those requirements as unknown
// rather than failed.
type Probe struct {
	// Transport is how capabilities.list was reached: "unix", "tcp" or
	// "http" ("" if unknown). Level 1 asks for an answer over a Unix
	// socket.
	Transport string
	// CapabilitiesErr is the error capabilities.list (and its aliases)
	// answered with, when they did not answer; Level is then called with a
	// nil *Capabilities.
	CapabilitiesErr error
	// Identity is the outcome of identity.get (nil: not called).
	Identity *Call
	// Health maps health.liveness, health.readiness and health.check to
	// their outcomes (a missing key: not called).
	Health map[string]*Call
	// MethodsChecked is true when every advertised method was called and
	// MethodNotFound lists those that answered -32601 (method not found).
	MethodsChecked bool
	MethodNotFound []string
}

// Status is the outcome of one requirement.
type Status int

const (
	// Unknown means the requirement was not observed (no live probe).
	Unknown Status = iota
	// Pass means the requirement is met.
	Pass
	// Fail means the requirement is not met; the Check's Reason says why.
	Fail
)

// String returns the status's wire spelling.
func (s Status) String() string {
	switch s {
	case Pass:
		return "pass"
	case Fail:
		return "fail"
	}
	return "unknown"
}

// MarshalText writes the status as "pass", "fail" or "unknown".
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Check is one requirement of the audit checklist of the Capability Wire
// Standard and its outcome.
type Check struct {
	// Level is 1, 2 or 3.
	Level int `json:"level"`
	// ID is a stable identifier, e.g. "L2.identity".
	ID string `json:"id"`
	// Requirement is the checklist item.
	Requirement string `json:"requirement"`
	// Status is pass, fail or unknown.
	Status Status `json:"status"`
	// Reason explains a fail or an unknown ("" for a pass).
	Reason string `json:"reason,omitempty"`
}

// String renders the check as "L2 <requirement>: <reason>".
func (c Check) String() string {
	s := fmt.Sprintf("L%d %s", c.Level, c.Requirement)
	if c.Reason != "" {
		s += ": " + c.Reason
	}
	return s
}

// Report is the compliance of one host.
type Report struct {
	// Level is the highest level whose requirements, and those of every
	// level below it, all pass or are unknown: what the host reaches if
	// the unobserved requirements hold. 0 when a Level 1 requirement
	// fails.
	Level int `json:"level"`
	// Verified is the highest level whose requirements (and those below)
	// all pass: what has actually been shown.
	Verified int `json:"verified"`
	// Checks lists every requirement in checklist order.
	Checks []Check `json:"checks"`
}

// Missed returns the failed checks.
func (r Report) Missed() []Check { return r.filter(Fail) }

// Unobserved returns the checks that could not be decided.
func (r Report) Unobserved() []Check { return r.filter(Unknown) }

// Reasons returns one line per failed requirement, each naming the level
// and the requirement, e.g. `L2 identity.get implemented and returns
// {primal, version}: identity.get failed: method not found`.
func (r Report) Reasons() []string {
	var out []string
	for _, c := range r.Missed() {
		out = append(out, c.String())
	}
	return out
}

func (r Report) filter(s Status) []Check {
	var out []Check
	for _, c := range r.Checks {
		if c.Status == s {
			out = append(out, c)
		}
	}
	return out
}

// semverRE is the SemVer 2.0.0 grammar (semver.org's suggested regexp).
var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// IsSemVer reports whether v is a SemVer 2.0.0 version, as the audit's
// L2.version check requires.
func IsSemVer(v string) bool { return semverRE.MatchString(v) }

// Level evaluates the audit checklist of the Capability Wire Standard
// (Levels 1-3) for a parsed capabilities.list result c and, optionally, the
// live observations p. Pass c == nil when capabilities.list did not answer
// (with p.CapabilitiesErr saying why). Requirements that only a live host
// can settle (health, identity.get, callability) are Unknown when p does
// not cover them.
//
// Every check is evaluated, so a report lists all the gaps at once, not only
// those of the lowest missed level.
func Level(c *Capabilities, p *Probe) Report {
	in := newLevelInput(c, p)
	r := Report{Checks: make([]Check, 0, len(checklist))}
	for _, q := range checklist {
		st, reason := q.check(in)
		if st == Pass {
			reason = ""
		}
		r.Checks = append(r.Checks, Check{Level: q.level, ID: q.id, Requirement: q.requirement, Status: st, Reason: reason})
	}
	r.Level, r.Verified = 3, 3
	for _, ch := range r.Checks {
		if ch.Status == Fail && ch.Level-1 < r.Level {
			r.Level = ch.Level - 1
		}
		if ch.Status != Pass && ch.Level-1 < r.Verified {
			r.Verified = ch.Level - 1
		}
	}
	return r
}

// requirement is one item of the audit checklist: its stable id, its
// level, the checklist's wording, how capmesh settles it (for
// docs/audit.md) and the check itself, which returns the status and, for
// a fail or an unknown, the reason.
type requirement struct {
	id          string
	level       int
	requirement string
	how         string
	check       func(in *levelInput) (Status, string)
}

// checklist is the audit checklist of the Capability Wire Standard
// (§Compliance Levels, §Audit Checklist), in report order. docs/audit.md
// lists it (TestAuditDocChecklist keeps the two in step).
var checklist = []requirement{
	{"L1.responds", 1, "capabilities.list responds to a JSON-RPC probe over UDS",
		"asked live (`capability.list`, `primal.capabilities` tried on -32601); over TCP/HTTP it is *unknown*, since the checklist says UDS", checkResponds},
	{"L1.parseable", 1, "response parseable by biomeOS (any format A-E)",
		"`wire.Parse` finds a method list in one of the formats A-E", checkParseable},
	{"L1.method", 1, "at least one callable method is advertised",
		"after calling them: a method answering -32601 does not count", checkOneMethod},
	{"L1.liveness", 1, `health.liveness responds with {status: "alive"} or {alive: true}`,
		"called, answer read by `wire.ReadHealth`", checkLiveness},
	{"L2.primal", 2, `result contains "primal" (canonical name)`,
		"present, non-empty, lowercase without spaces", checkPrimal},
	{"L2.version", 2, `result contains "version" (SemVer)`,
		"present and SemVer 2.0.0", checkVersion},
	{"L2.methods", 2, `result contains "methods" flat string array`,
		"present, non-empty, every entry a string", checkMethods},
	{"L2.callable", 2, `every entry in "methods" is callable (no method-not-found)`,
		"every advertised method is called with `{}`; parameter errors are fine, -32601 is not", checkCallable},
	{"L2.naming", 2, "method names follow the domain.operation convention",
		"`wire.ValidateMethodName` on every advertised method", checkNaming},
	{"L2.identity", 2, "identity.get implemented and returns {primal, version}",
		"called; primal and version must equal capabilities.list's", checkIdentity},
	{"L2.health", 2, "health.liveness, health.check, health.readiness all implemented",
		"all three called; none may fail", checkHealthTriad},
	{"L3.provided", 3, "provided_capabilities grouping present with type + methods per group",
		"present, non-empty, every group with a type and methods", checkProvided},
	{"L3.consumed", 3, "consumed_capabilities lists the cross-primal dependencies (method names)",
		"present; entries that are not method names (tokens like `cryptographic-signing`) make composition unverifiable and fail", checkConsumed},
	{"L3.cost", 3, "cost_estimates present for high-cost methods",
		"`cost_estimates` present", checkCost},
	{"L3.deps", 3, "operation_dependencies present for methods with prerequisites",
		"`operation_dependencies` present", checkDeps},
}

// levelInput is what the checks read: the result (never nil: an empty one
// when capabilities.list did not answer), the probe (never nil) and what
// several checks derive from them.
type levelInput struct {
	c          *Capabilities
	p          *Probe
	answered   bool
	env        Envelope
	advertised []string // "methods" when present, else every method found
}

func newLevelInput(c *Capabilities, p *Probe) *levelInput {
	if p == nil {
		p = &Probe{}
	}
	in := &levelInput{c: c, p: p, answered: c != nil}
	if c == nil {
		in.c = &Capabilities{}
	}
	in.env = in.c.Envelope
	in.advertised = in.env.MethodNames
	if in.env.Methods != Present {
		in.advertised = in.c.Methods
	}
	return in
}

// missing explains a standard field that is not there.
func (in *levelInput) missing(name string, f Field) string {
	if !in.answered {
		return "capabilities.list did not answer"
	}
	return fmt.Sprintf("%q is %s", name, f)
}

func checkResponds(in *levelInput) (Status, string) {
	switch {
	case !in.answered && in.p.CapabilitiesErr != nil:
		return Fail, "no answer: " + in.p.CapabilitiesErr.Error()
	case !in.answered:
		return Fail, "no capabilities.list result"
	case in.p.Transport == "unix":
		return Pass, ""
	case in.p.Transport == "":
		return Unknown, "result given without a live probe"
	}
	return Unknown, "answered over " + in.p.Transport + ", not probed over a Unix socket"
}

func checkParseable(in *levelInput) (Status, string) {
	for _, s := range in.c.Detected {
		if s != SourceObjectKeys {
			return Pass, ""
		}
	}
	return Fail, "no method list in methods, provided_capabilities, capabilities, method_info, semantic_mappings or a bare array"
}

func checkOneMethod(in *levelInput) (Status, string) {
	callable := in.c.Methods
	if in.p.MethodsChecked {
		callable = difference(in.c.Methods, in.p.MethodNotFound)
	}
	switch {
	case len(callable) > 0:
		return Pass, ""
	case len(in.c.Methods) > 0:
		return Fail, "every advertised method answered method not found"
	}
	return Fail, "no method advertised"
}

func checkLiveness(in *levelInput) (Status, string) {
	call, seen := in.p.Health[MethodHealthLiveness]
	switch {
	case !seen || call == nil:
		return Unknown, "health.liveness not probed"
	case call.Err != nil:
		return Fail, "health.liveness failed: " + call.Err.Error()
	case ReadHealth(KindLiveness, call.Result).Conformant:
		return Pass, ""
	}
	return Fail, "health.liveness answered " + abbrev(call.Result, 80)
}

func checkPrimal(in *levelInput) (Status, string) {
	c := in.c
	switch {
	case in.env.Primal != Present:
		return Fail, in.missing("primal", in.env.Primal)
	case c.Primal == "":
		return Fail, `"primal" is empty`
	case c.Primal != strings.ToLower(c.Primal) || strings.ContainsAny(c.Primal, " \t\r\n"):
		return Fail, fmt.Sprintf("%q is not lowercase without spaces", c.Primal)
	}
	return Pass, ""
}

func checkVersion(in *levelInput) (Status, string) {
	switch {
	case in.env.Version != Present:
		return Fail, in.missing("version", in.env.Version)
	case !semverRE.MatchString(in.c.Version):
		return Fail, fmt.Sprintf("%q is not a SemVer version", in.c.Version)
	}
	return Pass, ""
}

func checkMethods(in *levelInput) (Status, string) {
	env := in.env
	switch {
	case env.Methods != Present:
		return Fail, in.missing("methods", env.Methods)
	case env.MethodObjects > 0 || env.MethodInvalid > 0:
		return Fail, fmt.Sprintf("%d entries are objects and %d are invalid, not strings", env.MethodObjects, env.MethodInvalid)
	case len(env.MethodNames) == 0:
		return Fail, `"methods" is empty`
	}
	return Pass, ""
}

func checkCallable(in *levelInput) (Status, string) {
	switch {
	case !in.p.MethodsChecked:
		return Unknown, "advertised methods not called"
	case len(in.p.MethodNotFound) > 0:
		return Fail, fmt.Sprintf("%d answered method not found: %s", len(in.p.MethodNotFound), listSome(in.p.MethodNotFound, 8))
	}
	return Pass, ""
}

func checkNaming(in *levelInput) (Status, string) {
	if len(in.advertised) == 0 {
		return Fail, "no methods to check"
	}
	var bad []string
	for _, m := range dedupe(in.advertised) {
		if err := checkMethodName(m); err != nil {
			bad = append(bad, fmt.Sprintf("%q (%s)", m, err.(*MethodNameError).Reason))
		}
	}
	if len(bad) > 0 {
		return Fail, fmt.Sprintf("%d names do not: %s", len(bad), listSome(bad, 5))
	}
	return Pass, ""
}

func checkIdentity(in *levelInput) (Status, string) {
	c, call := in.c, in.p.Identity
	switch {
	case call == nil:
		return Unknown, "identity.get not probed"
	case call.Err != nil:
		return Fail, "identity.get failed: " + call.Err.Error()
	}
	id, err := ParseIdentity(call.Result)
	switch {
	case err != nil:
		return Fail, err.Error()
	case id.Primal == "" || id.Version == "":
		return Fail, "identity.get result lacks primal or version"
	case in.env.Primal == Present && id.Primal != c.Primal:
		return Fail, fmt.Sprintf("identity.get primal %q differs from capabilities.list primal %q", id.Primal, c.Primal)
	case in.env.Version == Present && id.Version != c.Version:
		return Fail, fmt.Sprintf("identity.get version %q differs from capabilities.list version %q", id.Version, c.Version)
	}
	return Pass, ""
}

func checkHealthTriad(in *levelInput) (Status, string) {
	var failed, unprobed []string
	for _, m := range []string{MethodHealthLiveness, MethodHealthCheck, MethodHealthReadiness} {
		call, seen := in.p.Health[m]
		switch {
		case !seen || call == nil:
			unprobed = append(unprobed, m)
		case call.Err != nil:
			failed = append(failed, m+" ("+call.Err.Error()+")")
		}
	}
	switch {
	case len(failed) > 0:
		return Fail, "failed: " + strings.Join(failed, ", ")
	case len(unprobed) > 0:
		return Unknown, "not probed: " + strings.Join(unprobed, ", ")
	}
	return Pass, ""
}

func checkProvided(in *levelInput) (Status, string) {
	var bad []string
	for i, g := range in.c.Groups {
		if g.Type == "" || len(g.Methods) == 0 {
			bad = append(bad, fmt.Sprintf("group %d (%q)", i, g.Type))
		}
	}
	switch {
	case in.env.ProvidedCapabilities != Present:
		return Fail, in.missing("provided_capabilities", in.env.ProvidedCapabilities)
	case len(in.c.Groups) == 0:
		return Fail, "provided_capabilities is empty"
	case len(bad) > 0:
		return Fail, "groups without a type or methods: " + listSome(bad, 5)
	}
	return Pass, ""
}

func checkConsumed(in *levelInput) (Status, string) {
	if in.env.ConsumedCapabilities != Present {
		return Fail, in.missing("consumed_capabilities", in.env.ConsumedCapabilities)
	}
	var bad []string
	for _, cc := range in.c.Consumed {
		if checkMethodName(cc.Name) != nil {
			bad = append(bad, cc.Name)
		}
	}
	if len(bad) > 0 {
		return Fail, fmt.Sprintf("%d entries are not method names, so composition cannot be checked: %s", len(bad), listSome(bad, 5))
	}
	return Pass, ""
}

func checkCost(in *levelInput) (Status, string) {
	if in.env.CostEstimates == Present {
		return Pass, ""
	}
	return Fail, in.missing("cost_estimates", in.env.CostEstimates)
}

func checkDeps(in *levelInput) (Status, string) {
	if in.env.OperationDependencies == Present {
		return Pass, ""
	}
	return Fail, in.missing("operation_dependencies", in.env.OperationDependencies)
}

// abbrev renders raw JSON for a message, cut to n bytes.
func abbrev(raw json.RawMessage, n int) string {
	s := strings.TrimSpace(string(raw))
	if s == "" {
		return "nothing"
	}
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
