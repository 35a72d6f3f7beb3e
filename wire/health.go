package wire

import (
	"bytes"
	"encoding/json"
	"strings"
)

// The aliases real primals answer the health triad under (rhizoCrypt,
// barraCuda, petalTongue; "canonical names and required aliases per
// wateringHole standards"): ping and health at liveness level, status and
// check at check level. NestGate's older router answers health at check
// level instead; see docs/DECISIONS.md.
var (
	LivenessAliases = []string{"ping", "health"}
	CheckAliases    = []string{"status", "check"}
)

// Health status values capmesh emits.
const (
	StatusAlive     = "alive"
	StatusReady     = "ready"
	StatusNotReady  = "not_ready"
	StatusHealthy   = "healthy"
	StatusDegraded  = "degraded"
	StatusUnhealthy = "unhealthy"
)

// Liveness is the result of health.liveness. It carries both spellings the
// audit checklist accepts — {status: "alive"} and {alive: true} — so that
// readers checking either one are satisfied, plus the identity fields that
// rhizoCrypt and NestGate add.
type Liveness struct {
	// Status is always "alive".
	Status string `json:"status"`
	// Alive is always true.
	Alive bool `json:"alive"`
	// Primal and Version identify the host.
	Primal  string `json:"primal,omitempty"`
	Version string `json:"version,omitempty"`
	// UptimeSeconds is the time since the host started.
	UptimeSeconds uint64 `json:"uptime_seconds"`
}

// NewLiveness returns the liveness result of a running host.
func NewLiveness(primal, version string, uptimeSeconds uint64) Liveness {
	return Liveness{Status: StatusAlive, Alive: true, Primal: primal, Version: version, UptimeSeconds: uptimeSeconds}
}

// Readiness is the result of health.readiness: {status: "ready" |
// "not_ready"} as rhizoCrypt and Songbird send it, with NestGate's boolean
// ready beside it, and the state of each subsystem when the host tracks
// them.
type Readiness struct {
	Status     string            `json:"status"`
	Ready      bool              `json:"ready"`
	Primal     string            `json:"primal,omitempty"`
	Version    string            `json:"version,omitempty"`
	Subsystems map[string]string `json:"subsystems,omitempty"`
}

// NewReadiness returns a readiness result; ready selects "ready" or
// "not_ready".
func NewReadiness(primal, version string, ready bool, subsystems map[string]string) Readiness {
	st := StatusNotReady
	if ready {
		st = StatusReady
	}
	return Readiness{Status: st, Ready: ready, Primal: primal, Version: version, Subsystems: subsystems}
}

// HealthCheck is the result of health.check: {status: "healthy" |
// "degraded" | "unhealthy", primal, version, uptime_seconds, subsystems}
// (Songbird, NestGate), with rhizoCrypt's boolean healthy beside it.
type HealthCheck struct {
	Status        string            `json:"status"`
	Healthy       bool              `json:"healthy"`
	Primal        string            `json:"primal"`
	Version       string            `json:"version"`
	UptimeSeconds uint64            `json:"uptime_seconds"`
	Subsystems    map[string]string `json:"subsystems,omitempty"`
}

// HealthKind is one member of the health triad.
type HealthKind int

// The three health probes.
const (
	KindLiveness HealthKind = iota
	KindReadiness
	KindCheck
)

// Method returns the canonical method name of the probe.
func (k HealthKind) Method() string {
	switch k {
	case KindReadiness:
		return MethodHealthReadiness
	case KindCheck:
		return MethodHealthCheck
	}
	return MethodHealthLiveness
}

// HealthState is what a health result says about the host.
type HealthState int

// Health states, from best to worst; HealthUnknown means the result did not
// say (for example {} or a shape capmesh does not know).
const (
	HealthUnknown HealthState = iota
	HealthUp
	HealthDegraded
	HealthDown
)

// String returns the state's wire spelling.
func (s HealthState) String() string {
	switch s {
	case HealthUp:
		return "up"
	case HealthDegraded:
		return "degraded"
	case HealthDown:
		return "down"
	}
	return "unknown"
}

// HealthReading is the interpretation of one health result.
type HealthReading struct {
	// State is what the result says.
	State HealthState
	// Status is the status string as sent ("" when there is none).
	Status string
	// Conformant is true when the result has the shape the audit
	// checklist asks for: for liveness {status: "alive"} or {alive: true};
	// for readiness and check (for which the standard fixes no shape) any
	// JSON object.
	Conformant bool
}

var (
	upWords       = map[string]bool{"alive": true, "ok": true, "healthy": true, "up": true, "pass": true, "ready": true, "serving": true, "pong": true, "running": true}
	degradedWords = map[string]bool{"degraded": true, "warn": true, "warning": true}
	downWords     = map[string]bool{"dead": true, "down": true, "fail": true, "failed": true, "unhealthy": true, "not_ready": true, "notready": true, "unready": true, "starting": true, "stopping": true, "error": true}
)

// ReadHealth interprets the result of a health probe of the given kind in
// any of the shapes real hosts send: a status string ("alive", "ready",
// "healthy", "degraded", "not_ready", …), a boolean alive / ready / healthy,
// a bare string ("pong") or a bare boolean. The boolean that matches the
// kind takes precedence over the status string.
func ReadHealth(kind HealthKind, result json.RawMessage) HealthReading {
	r := bytes.TrimSpace(result)
	var s string
	if json.Unmarshal(r, &s) == nil {
		return HealthReading{State: word(s), Status: s}
	}
	var b bool
	if json.Unmarshal(r, &b) == nil {
		return HealthReading{State: boolState(b)}
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(r, &obj) != nil || obj == nil {
		return HealthReading{}
	}
	var out HealthReading
	_ = json.Unmarshal(obj["status"], &out.Status)
	out.State = word(out.Status)
	flags := map[HealthKind][]string{
		KindLiveness:  {"alive", "healthy"},
		KindReadiness: {"ready"},
		KindCheck:     {"healthy", "ready"},
	}[kind]
	aliveFlag := false
	for _, f := range flags {
		var v bool
		if raw, ok := obj[f]; ok && json.Unmarshal(raw, &v) == nil {
			out.State = boolState(v)
			if f == "alive" && v {
				aliveFlag = true
			}
			break
		}
	}
	if kind == KindLiveness {
		out.Conformant = out.Status == StatusAlive || aliveFlag
	} else {
		out.Conformant = true
	}
	return out
}

func word(s string) HealthState {
	w := strings.ToLower(strings.TrimSpace(s))
	switch {
	case upWords[w]:
		return HealthUp
	case degradedWords[w]:
		return HealthDegraded
	case downWords[w]:
		return HealthDown
	}
	return HealthUnknown
}

func boolState(b bool) HealthState {
	if b {
		return HealthUp
	}
	return HealthDown
}
