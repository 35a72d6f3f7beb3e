package conformance

import (
	"fmt"
	"strings"
	"time"
)

// Status is the outcome of one check.
type Status string

// Check outcomes. Warn is a failed SHOULD (or a capmesh security default the
// specs do not mandate); Skip means the requirement does not apply to this
// host; Unknown means it applies but could not be observed.
const (
	Pass    Status = "pass"
	Fail    Status = "fail"
	Warn    Status = "warn"
	Unknown Status = "unknown"
	Skip    Status = "skip"
)

// Suite names.
const (
	SuiteWire   = "wire"
	SuiteIPC    = "ipc"
	SuiteCHP    = "chp"
	SuiteRFC005 = "rfc005"
)

// Check is one requirement and its outcome on one host.
type Check struct {
	// Suite is the specification the requirement comes from.
	Suite string `json:"suite"`
	// ID is stable across releases, e.g. "L2.identity", "IPC.parse_error",
	// "CHP.4".
	ID string `json:"id"`
	// Level is the Capability Wire Standard level (1-3) of a wire check.
	Level int `json:"level,omitempty"`
	// Requirement is the checklist item, in the spec's words.
	Requirement string `json:"requirement"`
	// Source names the section of the spec that states it.
	Source string `json:"source"`
	// Status is the outcome; Reason explains anything but a pass.
	Status Status `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// String renders the check as "✗ L2.identity requirement: reason".
func (c Check) String() string {
	s := fmt.Sprintf("%s %s %s", c.Status.Mark(), c.ID, c.Requirement)
	if c.Reason != "" {
		s += ": " + c.Reason
	}
	return s
}

// Mark is the one-character rendering of a status.
func (s Status) Mark() string {
	switch s {
	case Pass:
		return "✓"
	case Fail:
		return "✗"
	case Warn:
		return "!"
	case Skip:
		return "-"
	}
	return "?"
}

// Announcement states of a host's signed_announcement.
const (
	AnnouncementAbsent    = "absent"
	AnnouncementValid     = "valid"
	AnnouncementInvalid   = "invalid"
	AnnouncementForgeable = "forgeable"
)

// HostReport is the audit of one endpoint.
type HostReport struct {
	// Endpoint is the audited address in canonical form.
	Endpoint string `json:"endpoint"`
	// Socket describes the socket file when the endpoint is a Unix socket.
	Socket *SocketInfo `json:"socket,omitempty"`
	// Reachable is false when no connection could be made; Error says why.
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
	// Primal and Version are what capabilities.list (or identity.get) said.
	Primal  string `json:"primal,omitempty"`
	Version string `json:"version,omitempty"`
	// Level is the Capability Wire Standard level with nothing failed
	// (unobserved requirements given the benefit of the doubt); Verified
	// the level whose every requirement was observed to pass.
	Level    int `json:"level"`
	Verified int `json:"verified"`
	// Announcement is absent, valid, invalid or forgeable.
	Announcement string `json:"announcement"`
	// CHP summarises the CHP suite; nil when the host does not speak CHP.
	CHP *CHPSummary `json:"chp,omitempty"`
	// Checks lists every requirement, suite by suite.
	Checks []Check `json:"checks"`
	// Duration is how long the audit of this host took.
	Duration time.Duration `json:"duration_ns"`
}

// CHPSummary is the outcome of the CHP suite in one line.
type CHPSummary struct {
	// Binding is "http" or "jsonrpc".
	Binding string `json:"binding"`
	// HostID is the HostDescriptor id.
	HostID string `json:"host_id,omitempty"`
	// Passed counts the §11 requirements (of 9) that passed; Failed those
	// that failed. The rest were not applicable or not observable.
	Passed int `json:"passed"`
	Failed int `json:"failed"`
	// NoCapabilities: the host serves the CHP binding but declares no
	// capabilities, so there was nothing to audit (and nothing passed).
	NoCapabilities bool `json:"no_capabilities,omitempty"`
}

// OK reports whether the host speaks CHP, governs at least one capability
// and failed none of its checks (CHP requirements and the chain check).
func (s *CHPSummary) OK() bool { return s != nil && s.Failed == 0 && !s.NoCapabilities }

// Failed returns the failed checks (not the warnings).
func (r *HostReport) Failed() []Check { return r.filter(Fail) }

// Warnings returns the failed SHOULDs.
func (r *HostReport) Warnings() []Check { return r.filter(Warn) }

func (r *HostReport) filter(s Status) []Check {
	var out []Check
	for _, c := range r.Checks {
		if c.Status == s {
			out = append(out, c)
		}
	}
	return out
}

// Suite returns the checks of one suite.
func (r *HostReport) Suite(name string) []Check {
	var out []Check
	for _, c := range r.Checks {
		if c.Suite == name {
			out = append(out, c)
		}
	}
	return out
}

// Check returns the check with the given id, or nil.
func (r *HostReport) Check(id string) *Check {
	for i := range r.Checks {
		if r.Checks[i].ID == id {
			return &r.Checks[i]
		}
	}
	return nil
}

// Requirement is what a caller demands of a host (the CLI's --require-level
// and --require-chp).
type Requirement struct {
	// Level is the Wire Standard level the host must reach (0: none).
	Level int
	// Strict demands the level be verified, not merely unfailed.
	Strict bool
	// CHP demands that the host speak CHP and fail none of its checks. A
	// host that serves the CHP binding but governs no capabilities (a
	// capmesh node) meets it on its own: it has nothing to govern and
	// failed nothing. MachineReport.Gate demands in addition that at least
	// one audited host govern a capability.
	CHP bool
}

// Meets reports whether r holds and, if not, why.
func (rep *HostReport) Meets(r Requirement) (bool, string) {
	var why []string
	if !rep.Reachable {
		return false, "unreachable: " + rep.Error
	}
	lvl := rep.Level
	if r.Strict {
		lvl = rep.Verified
	}
	if lvl < r.Level {
		what := "level"
		if r.Strict {
			what = "verified level"
		}
		why = append(why, fmt.Sprintf("%s %d < %d", what, lvl, r.Level))
	}
	if r.CHP {
		switch {
		case rep.CHP == nil:
			why = append(why, "does not speak CHP")
		case rep.CHP.NoCapabilities:
			// Nothing to govern: not a failure of this host.
		case !rep.CHP.OK():
			why = append(why, fmt.Sprintf("CHP: %d requirement(s) failed", rep.CHP.Failed))
		}
	}
	return len(why) == 0, strings.Join(why, "; ")
}

// GateFailure is one reason a gate (MachineReport.Gate) did not pass.
type GateFailure struct {
	// Endpoint is the host that failed, or the audited directory when the
	// failure is the machine's (no hosts, no CHP host).
	Endpoint string
	// Reason says why.
	Reason string
}

// Gate applies r to an audit and returns why it fails, nil when it passes:
// every audited host must meet r (HostReport.Meets); an audit that found no
// host at all fails any requirement (a gate over nothing is not a pass);
// and r.CHP fails unless at least one host governs a CHP capability, so a
// machine whose only CHP speaker is a node with nothing to govern does not
// pass --require-chp by default. A zero r always passes.
func (m *MachineReport) Gate(r Requirement) []GateFailure {
	if r.Level == 0 && !r.CHP {
		return nil
	}
	where := m.Dir
	if where == "" && len(m.Hosts) == 1 {
		where = m.Hosts[0].Endpoint
	} else if where == "" {
		where = "the audited hosts"
	}
	if len(m.Hosts) == 0 {
		return []GateFailure{{Endpoint: where, Reason: "no hosts found"}}
	}
	var out []GateFailure
	governs := false
	for _, h := range m.Hosts {
		if ok, why := h.Meets(r); !ok {
			out = append(out, GateFailure{Endpoint: h.Endpoint, Reason: why})
		}
		if h.CHP != nil && !h.CHP.NoCapabilities {
			governs = true
		}
	}
	if r.CHP && !governs {
		out = append(out, GateFailure{Endpoint: where, Reason: "no audited host governs a CHP capability"})
	}
	return out
}

// MachineReport is the audit of every socket in a directory.
type MachineReport struct {
	// Dir is the audited directory.
	Dir string `json:"dir"`
	// Hosts holds one report per live (or unreachable) socket, sorted by
	// socket name.
	Hosts []*HostReport `json:"hosts"`
	// Dead lists socket files nobody listens on (stale sockets).
	Dead []string `json:"dead_sockets"`
	// Dangling lists symlinks whose target does not exist.
	Dangling []string `json:"dangling_links"`
	// Duration is the wall time of the whole audit.
	Duration time.Duration `json:"duration_ns"`
}
