package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/capmesh/capmesh/identity"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/wire"
)

const (
	srcWireLevels   = "Capability Wire Standard v1.0 §Compliance Levels, §Audit Checklist"
	srcWireSA       = "Capability Wire Standard v1.0 §Signed Capability Announcements (SA-01)"
	srcWireTS       = "Capability Wire Standard v1.0 §Transport Security Advertisement (TS-01)"
	srcWireIdentity = "Capability Wire Standard v1.0 §identity.get"
)

// wireOutcome is what the wire suite learned, for the other suites.
type wireOutcome struct {
	in *wire.Inspection
	// err is the transport failure that stopped capabilities.list.
	err error
	// btsp is set when the host refused plaintext with the TS-01 error.
	btsp bool
	// dropped is set when the host closed the connection without a reply.
	dropped bool
	// secured is set when the audit spoke BTSP with the host (a completed
	// handshake with this process's family seed).
	secured bool
}

// auditWire runs the Capability Wire Standard checklist over c.
func auditWire(ctx context.Context, c jsonrpc.Caller, transport string, o *Options, familyScoped, secured bool) ([]Check, wireOutcome) {
	in, err := wire.Inspect(ctx, c, &wire.InspectOptions{
		Transport:    transport,
		CallTimeout:  o.probeTimeout(),
		ProbeMethods: !o.NoCall,
	})
	out := wireOutcome{in: in, err: err, secured: secured}
	var checks []Check
	if err != nil {
		out.dropped = isDrop(err)
		// Nothing but L1.responds can be judged without an answer.
		rep := wire.Level(nil, &wire.Probe{Transport: transport, CapabilitiesErr: err})
		checks = fromReport(rep)
	} else {
		if e := in.Probe.CapabilitiesErr; e != nil {
			var je *jsonrpc.Error
			if errors.As(e, &je) && je.Code == jsonrpc.InvalidRequest && strings.Contains(strings.ToLower(je.Message), "btsp") {
				out.btsp = true
			}
		}
		checks = fromReport(in.Report)
		checks = append(checks, healthShapes(in))
	}
	checks = append(checks, announcementChecks(in, o)...)
	checks = append(checks, transportSecurity(out, familyScoped))
	return checks, out
}

// isDrop reports whether err means the peer closed the connection without
// answering (as opposed to a timeout or a refused connection).
func isDrop(err error) bool {
	var lost *jsonrpc.ConnectionLostError
	return errors.As(err, &lost) && !errors.Is(err, context.DeadlineExceeded)
}

func fromReport(rep wire.Report) []Check {
	out := make([]Check, 0, len(rep.Checks))
	for _, c := range rep.Checks {
		st := Unknown
		switch c.Status {
		case wire.Pass:
			st = Pass
		case wire.Fail:
			st = Fail
		}
		out = append(out, Check{Suite: SuiteWire, ID: c.ID, Level: c.Level, Requirement: c.Requirement,
			Source: srcWireLevels, Status: st, Reason: c.Reason})
	}
	return out
}

// healthShapes checks that readiness and check answer JSON objects, the
// shape every reader of the triad expects (liveness is L1.liveness).
func healthShapes(in *wire.Inspection) Check {
	ch := Check{Suite: SuiteWire, ID: "W.health_shapes", Requirement: "health.readiness and health.check answer JSON objects with a status",
		Source: "Capability Wire Standard v1.0 §Semantic Method Naming (health triad); Primal IPC Protocol v3.1 §Protocol checklist"}
	var bad, unprobed []string
	for i, m := range []string{wire.MethodHealthReadiness, wire.MethodHealthCheck} {
		call := in.Probe.Health[m]
		switch {
		case call == nil || call.Err != nil:
			unprobed = append(unprobed, m)
		default:
			h := wire.ReadHealth(wire.HealthKind(i+1), call.Result)
			if !h.Conformant || h.State == wire.HealthUnknown {
				bad = append(bad, fmt.Sprintf("%s answered %s", m, abbrev(call.Result)))
			}
		}
	}
	switch {
	case len(bad) > 0:
		ch.Status, ch.Reason = Fail, strings.Join(bad, "; ")
	case len(unprobed) == 2:
		ch.Status, ch.Reason = Skip, "neither is implemented (L2.health reports it)"
	default:
		ch.Status = Pass
	}
	return ch
}

// announcementChecks verifies signed_announcement and asks whether its key
// is the seed-derived one anyone can compute.
func announcementChecks(in *wire.Inspection, o *Options) []Check {
	sig := Check{Suite: SuiteWire, ID: "W.announcement", Requirement: "signed_announcement, when present, verifies over primal, version and methods", Source: srcWireSA}
	key := Check{Suite: SuiteWire, ID: "W.announcement_key", Requirement: "the announcement key is not the forgeable seed-derived key", Source: srcWireSA + "; capmesh DESIGN §Identity and trust"}
	switch {
	case in == nil || in.Capabilities == nil:
		sig.Status, sig.Reason = Unknown, "no capabilities.list result"
		key.Status, key.Reason = Skip, "no announcement"
	case in.Announcement == nil:
		sig.Status, sig.Reason = Skip, "no signed_announcement (optional)"
		key.Status, key.Reason = Skip, "no announcement"
	case in.Announcement.Err != nil:
		sig.Status, sig.Reason = Fail, in.Announcement.Err.Error()
		key.Status, key.Reason = Skip, "announcement does not verify"
	default:
		v := in.Announcement.Verified
		sig.Status = Pass
		if !v.MethodsCovered {
			sig.Status, sig.Reason = Warn, "signed_fields leaves out methods: the advertised methods are not attested"
		}
		primal := in.Capabilities.Primal
		if node, ok := derivedFrom(v.PublicKey, primal, nodeCandidates(in, o)); ok {
			key.Status = Fail
			key.Reason = fmt.Sprintf("FORGEABLE: the key is SHA-256(\"primal-identity-key:%s:%s\"), which anyone who knows the name and node id can compute", primal, node)
		} else {
			key.Status = Pass
		}
	}
	return []Check{sig, key}
}

// nodeCandidates are the node ids tried when looking for a derived key: the
// ones given, $NODE_ID, a node_id in identity.get, and common defaults.
func nodeCandidates(in *wire.Inspection, o *Options) []string {
	c := append([]string(nil), o.NodeIDs...)
	if v := os.Getenv("NODE_ID"); v != "" {
		c = append(c, v)
	}
	if in != nil && in.Probe.Identity != nil && in.Probe.Identity.Err == nil {
		var id struct {
			NodeID string `json:"node_id"`
		}
		if json.Unmarshal(in.Probe.Identity.Result, &id) == nil && id.NodeID != "" {
			c = append(c, id.NodeID)
		}
	}
	if h, err := os.Hostname(); err == nil {
		c = append(c, h)
	}
	return append(c, "default", "standalone", "local", "node-1", "")
}

func derivedFrom(pub identity.PublicKey, primal string, nodes []string) (string, bool) {
	for _, n := range nodes {
		if pub.IsEcoPrimalsDerived(primal, n) {
			return n, true
		}
	}
	return "", false
}

// transportSecurity compares what transport_security claims with what the
// socket did.
func transportSecurity(w wireOutcome, familyScoped bool) Check {
	ch := Check{Suite: SuiteWire, ID: "W.transport_security", Requirement: "transport_security tells the truth, and a BTSP socket refuses plaintext with a JSON-RPC error rather than a silent drop", Source: srcWireTS}
	switch {
	case w.dropped:
		ch.Status = Fail
		ch.Reason = "the connection was closed without any reply: a BTSP socket SHOULD answer -32600 \"BTSP handshake required\" before dropping (TS-01), and a plaintext host must answer"
		return ch
	case w.btsp:
		ch.Status, ch.Reason = Pass, "plaintext refused with -32600 \"BTSP handshake required\""
		return ch
	case w.err != nil || w.in == nil || w.in.Capabilities == nil:
		ch.Status, ch.Reason = Unknown, "no capabilities.list result"
		return ch
	}
	ts := w.in.Capabilities.TransportSecurity
	switch {
	case w.secured && (ts == nil || !ts.BTSPRequired):
		ch.Status, ch.Reason = Warn, "completed a BTSP handshake, yet does not advertise btsp_required: true"
	case w.secured:
		ch.Status, ch.Reason = Pass, "BTSP handshake completed; advertises btsp_required: true"
	case ts != nil && ts.BTSPRequired && slices.Contains(ts.CleartextMethods, "capabilities.list"):
		ch.Status, ch.Reason = Pass, "btsp_required: true; capabilities.list answered in cleartext, as its cleartext_methods declare"
	case ts == nil && familyScoped:
		ch.Status, ch.Reason = Warn, "a family-scoped socket SHOULD advertise transport_security"
	case ts == nil:
		ch.Status, ch.Reason = Skip, "transport_security not advertised (optional on a standalone socket)"
	case ts.BTSPRequired:
		ch.Status, ch.Reason = Fail, "advertises btsp_required: true, yet answered plaintext JSON-RPC"
	case !ts.CleartextAvailable:
		ch.Status, ch.Reason = Fail, "advertises cleartext_available: false, yet answered plaintext JSON-RPC"
	default:
		ch.Status = Pass
	}
	return ch
}
