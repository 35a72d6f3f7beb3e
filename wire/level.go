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
	if p == nil {
		p = &Probe{}
	}
	var r Report
	add := func(level int, id, req string, st Status, reason string) {
		r.Checks = append(r.Checks, Check{Level: level, ID: id, Requirement: req, Status: st, Reason: reason})
	}

	// ── Level 1: Routable ──
	switch {
	case c == nil && p.CapabilitiesErr != nil:
		add(1, "L1.responds", "capabilities.list responds to a JSON-RPC probe over UDS", Fail, "no answer: "+p.CapabilitiesErr.Error())
	case c == nil:
		add(1, "L1.responds", "capabilities.list responds to a JSON-RPC probe over UDS", Fail, "no capabilities.list result")
	case p.Transport == "unix":
		add(1, "L1.responds", "capabilities.list responds to a JSON-RPC probe over UDS", Pass, "")
	case p.Transport == "":
		add(1, "L1.responds", "capabilities.list responds to a JSON-RPC probe over UDS", Unknown, "result given without a live probe")
	default:
		add(1, "L1.responds", "capabilities.list responds to a JSON-RPC probe over UDS", Unknown, "answered over "+p.Transport+", not probed over a Unix socket")
	}
	answered := c != nil
	if c == nil {
		c = &Capabilities{}
	}
	// missing explains a standard field that is not there.
	missing := func(name string, f Field) string {
		if !answered {
			return "capabilities.list did not answer"
		}
		return fmt.Sprintf("%q is %s", name, f)
	}
	biomeOS := false
	for _, s := range c.Detected {
		if s != SourceObjectKeys {
			biomeOS = true
		}
	}
	if biomeOS {
		add(1, "L1.parseable", "response parseable by biomeOS (any format A-E)", Pass, "")
	} else {
		add(1, "L1.parseable", "response parseable by biomeOS (any format A-E)", Fail, "no method list in methods, provided_capabilities, capabilities, method_info, semantic_mappings or a bare array")
	}
	callable := c.Methods
	if p.MethodsChecked {
		callable = difference(c.Methods, p.MethodNotFound)
	}
	switch {
	case len(callable) > 0:
		add(1, "L1.method", "at least one callable method is advertised", Pass, "")
	case len(c.Methods) > 0:
		add(1, "L1.method", "at least one callable method is advertised", Fail, "every advertised method answered method not found")
	default:
		add(1, "L1.method", "at least one callable method is advertised", Fail, "no method advertised")
	}
	{
		const req = `health.liveness responds with {status: "alive"} or {alive: true}`
		call, seen := p.Health[MethodHealthLiveness]
		switch {
		case !seen || call == nil:
			add(1, "L1.liveness", req, Unknown, "health.liveness not probed")
		case call.Err != nil:
			add(1, "L1.liveness", req, Fail, "health.liveness failed: "+call.Err.Error())
		default:
			if h := ReadHealth(KindLiveness, call.Result); h.Conformant {
				add(1, "L1.liveness", req, Pass, "")
			} else {
				add(1, "L1.liveness", req, Fail, "health.liveness answered "+abbrev(call.Result, 80))
			}
		}
	}

	// ── Level 2: Standard ──
	env := c.Envelope
	switch {
	case env.Primal == Present && c.Primal == "":
		add(2, "L2.primal", `result contains "primal" (canonical name)`, Fail, `"primal" is empty`)
	case env.Primal == Present && (c.Primal != strings.ToLower(c.Primal) || strings.ContainsAny(c.Primal, " \t\r\n")):
		add(2, "L2.primal", `result contains "primal" (canonical name)`, Fail, fmt.Sprintf("%q is not lowercase without spaces", c.Primal))
	case env.Primal == Present:
		add(2, "L2.primal", `result contains "primal" (canonical name)`, Pass, "")
	default:
		add(2, "L2.primal", `result contains "primal" (canonical name)`, Fail, missing("primal", env.Primal))
	}
	switch {
	case env.Version == Present && semverRE.MatchString(c.Version):
		add(2, "L2.version", `result contains "version" (SemVer)`, Pass, "")
	case env.Version == Present:
		add(2, "L2.version", `result contains "version" (SemVer)`, Fail, fmt.Sprintf("%q is not a SemVer version", c.Version))
	default:
		add(2, "L2.version", `result contains "version" (SemVer)`, Fail, missing("version", env.Version))
	}
	switch {
	case env.Methods != Present:
		add(2, "L2.methods", `result contains "methods" flat string array`, Fail, missing("methods", env.Methods))
	case env.MethodObjects > 0 || env.MethodInvalid > 0:
		add(2, "L2.methods", `result contains "methods" flat string array`, Fail, fmt.Sprintf("%d entries are objects and %d are invalid, not strings", env.MethodObjects, env.MethodInvalid))
	case len(env.MethodNames) == 0:
		add(2, "L2.methods", `result contains "methods" flat string array`, Fail, `"methods" is empty`)
	default:
		add(2, "L2.methods", `result contains "methods" flat string array`, Pass, "")
	}
	advertised := env.MethodNames
	if env.Methods != Present {
		advertised = c.Methods
	}
	switch {
	case !p.MethodsChecked:
		add(2, "L2.callable", `every entry in "methods" is callable (no method-not-found)`, Unknown, "advertised methods not called")
	case len(p.MethodNotFound) > 0:
		add(2, "L2.callable", `every entry in "methods" is callable (no method-not-found)`, Fail, fmt.Sprintf("%d answered method not found: %s", len(p.MethodNotFound), listSome(p.MethodNotFound, 8)))
	default:
		add(2, "L2.callable", `every entry in "methods" is callable (no method-not-found)`, Pass, "")
	}
	{
		var bad []string
		for _, m := range dedupe(advertised) {
			if err := checkMethodName(m); err != nil {
				bad = append(bad, fmt.Sprintf("%q (%s)", m, err.(*MethodNameError).Reason))
			}
		}
		switch {
		case len(advertised) == 0:
			add(2, "L2.naming", "method names follow the domain.operation convention", Fail, "no methods to check")
		case len(bad) > 0:
			add(2, "L2.naming", "method names follow the domain.operation convention", Fail, fmt.Sprintf("%d names do not: %s", len(bad), listSome(bad, 5)))
		default:
			add(2, "L2.naming", "method names follow the domain.operation convention", Pass, "")
		}
	}
	{
		const req = "identity.get implemented and returns {primal, version}"
		switch {
		case p.Identity == nil:
			add(2, "L2.identity", req, Unknown, "identity.get not probed")
		case p.Identity.Err != nil:
			add(2, "L2.identity", req, Fail, "identity.get failed: "+p.Identity.Err.Error())
		default:
			id, err := ParseIdentity(p.Identity.Result)
			switch {
			case err != nil:
				add(2, "L2.identity", req, Fail, err.Error())
			case id.Primal == "" || id.Version == "":
				add(2, "L2.identity", req, Fail, "identity.get result lacks primal or version")
			case env.Primal == Present && id.Primal != c.Primal:
				add(2, "L2.identity", req, Fail, fmt.Sprintf("identity.get primal %q differs from capabilities.list primal %q", id.Primal, c.Primal))
			case env.Version == Present && id.Version != c.Version:
				add(2, "L2.identity", req, Fail, fmt.Sprintf("identity.get version %q differs from capabilities.list version %q", id.Version, c.Version))
			default:
				add(2, "L2.identity", req, Pass, "")
			}
		}
	}
	{
		const req = "health.liveness, health.check, health.readiness all implemented"
		var failed, unprobed []string
		for _, m := range []string{MethodHealthLiveness, MethodHealthCheck, MethodHealthReadiness} {
			call, seen := p.Health[m]
			switch {
			case !seen || call == nil:
				unprobed = append(unprobed, m)
			case call.Err != nil:
				failed = append(failed, m+" ("+call.Err.Error()+")")
			}
		}
		switch {
		case len(failed) > 0:
			add(2, "L2.health", req, Fail, "failed: "+strings.Join(failed, ", "))
		case len(unprobed) > 0:
			add(2, "L2.health", req, Unknown, "not probed: "+strings.Join(unprobed, ", "))
		default:
			add(2, "L2.health", req, Pass, "")
		}
	}

	// ── Level 3: Composable ──
	{
		const req = "provided_capabilities grouping present with type + methods per group"
		var bad []string
		for i, g := range c.Groups {
			if g.Type == "" || len(g.Methods) == 0 {
				bad = append(bad, fmt.Sprintf("group %d (%q)", i, g.Type))
			}
		}
		switch {
		case env.ProvidedCapabilities != Present:
			add(3, "L3.provided", req, Fail, missing("provided_capabilities", env.ProvidedCapabilities))
		case len(c.Groups) == 0:
			add(3, "L3.provided", req, Fail, "provided_capabilities is empty")
		case len(bad) > 0:
			add(3, "L3.provided", req, Fail, "groups without a type or methods: "+listSome(bad, 5))
		default:
			add(3, "L3.provided", req, Pass, "")
		}
	}
	{
		const req = "consumed_capabilities lists the cross-primal dependencies (method names)"
		var bad []string
		for _, cc := range c.Consumed {
			if checkMethodName(cc.Name) != nil {
				bad = append(bad, cc.Name)
			}
		}
		switch {
		case env.ConsumedCapabilities != Present:
			add(3, "L3.consumed", req, Fail, missing("consumed_capabilities", env.ConsumedCapabilities))
		case len(bad) > 0:
			add(3, "L3.consumed", req, Fail, fmt.Sprintf("%d entries are not method names, so composition cannot be checked: %s", len(bad), listSome(bad, 5)))
		default:
			add(3, "L3.consumed", req, Pass, "")
		}
	}
	if env.CostEstimates == Present {
		add(3, "L3.cost", "cost_estimates present for high-cost methods", Pass, "")
	} else {
		add(3, "L3.cost", "cost_estimates present for high-cost methods", Fail, missing("cost_estimates", env.CostEstimates))
	}
	if env.OperationDependencies == Present {
		add(3, "L3.deps", "operation_dependencies present for methods with prerequisites", Pass, "")
	} else {
		add(3, "L3.deps", "operation_dependencies present for methods with prerequisites", Fail, missing("operation_dependencies", env.OperationDependencies))
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
