package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/capmesh/capmesh/jsonrpc"
)

// InspectOptions configure Inspect. A nil *InspectOptions means defaults.
type InspectOptions struct {
	// Transport is how the caller reaches the host ("unix", "tcp",
	// "http"); it is recorded in the Probe (Level 1 asks for UDS).
	Transport string
	// CallTimeout bounds each call. Default 5 s.
	CallTimeout time.Duration
	// ProbeMethods calls every advertised method with empty params to find
	// those that answer method not found. Off by default: calling a method
	// may have side effects on the host.
	ProbeMethods bool
	// Order is the parser priority (default OrderStandard).
	Order Order
}

func (o *InspectOptions) timeout() time.Duration {
	if o == nil || o.CallTimeout <= 0 {
		return 5 * time.Second
	}
	return o.CallTimeout
}

// Inspection is what Inspect learned about one host.
type Inspection struct {
	// Method is the name capabilities.list answered under (the method
	// itself or one of CapabilitiesListAliases); "" when none answered.
	Method string
	// Result is the raw capabilities.list result.
	Result json.RawMessage
	// Capabilities is the parsed result (nil when there was none or it was
	// neither an object nor an array).
	Capabilities *Capabilities
	// Identity is the identity.get result when it answered and parsed.
	Identity *Identity
	// Health holds the reading of each health probe that answered.
	Health map[string]HealthReading
	// Announcement is the outcome of verifying signed_announcement (nil
	// when the host sends none).
	Announcement *AnnouncementCheck
	// Probe is the raw live observations; Report is Level(Capabilities,
	// Probe).
	Probe  Probe
	Report Report
}

// AnnouncementCheck is the verification outcome of a signed_announcement.
type AnnouncementCheck struct {
	// Verified is set when the signature verified; Err says why not.
	Verified *VerifiedAnnouncement
	Err      error
}

// healthMethods is the triad in HealthKind order (liveness, readiness,
// check), the order they are probed in.
var healthMethods = []string{MethodHealthLiveness, MethodHealthReadiness, MethodHealthCheck}

// Inspect asks a host everything the Capability Wire Standard lets a
// client ask: capabilities.list (falling back to its aliases when the host
// answers method not found), identity.get and the health triad, and —
// with ProbeMethods — every advertised method. It verifies the signed
// announcement, if any, and computes the compliance Report.
//
// A JSON-RPC error from the host is an observation, not a failure of
// Inspect. Inspect returns an error only when capabilities.list cannot be
// asked at all (the connection fails or the context ends); the error then
// wraps the transport error.
func Inspect(ctx context.Context, c jsonrpc.Caller, opts *InspectOptions) (*Inspection, error) {
	in := &Inspection{Health: map[string]HealthReading{}}
	if opts != nil {
		in.Probe.Transport = opts.Transport
	}
	order := OrderStandard
	if opts != nil {
		order = opts.Order
	}
	call := func(method string, params any) *Call {
		cctx, cancel := context.WithTimeout(ctx, opts.timeout())
		defer cancel()
		var raw json.RawMessage
		err := c.Call(cctx, method, params, &raw)
		return &Call{Result: raw, Err: err}
	}

	// capabilities.list, then its aliases on method not found.
	names := append([]string{MethodCapabilitiesList}, CapabilitiesListAliases...)
	for i, m := range names {
		r := call(m, nil)
		if r.Err == nil {
			in.Method, in.Result = m, r.Result
			break
		}
		if _, isRPC := jsonrpc.ErrorCode(r.Err); !isRPC {
			return nil, fmt.Errorf("capabilities.list: %w", r.Err)
		}
		if !errors.Is(r.Err, jsonrpc.MethodNotFound) {
			in.Probe.CapabilitiesErr = fmt.Errorf("%s: %w", m, r.Err)
			break
		}
		if i == len(names)-1 {
			in.Probe.CapabilitiesErr = fmt.Errorf("none of %s answered: %w", strings.Join(names, ", "), r.Err)
		}
	}
	if in.Method != "" {
		caps, err := Parse(in.Result, WithOrder(order))
		if err != nil {
			in.Probe.CapabilitiesErr = err
		} else {
			in.Capabilities = caps
		}
	}

	in.Probe.Identity = call(MethodIdentityGet, nil)
	if in.Probe.Identity.Err == nil {
		if id, err := ParseIdentity(in.Probe.Identity.Result); err == nil {
			in.Identity = &id
		}
	}
	in.Probe.Health = map[string]*Call{}
	for i, m := range healthMethods {
		r := call(m, nil)
		in.Probe.Health[m] = r
		if r.Err == nil {
			in.Health[m] = ReadHealth(HealthKind(i), r.Result)
		}
	}
	if caps := in.Capabilities; caps != nil {
		if opts != nil && opts.ProbeMethods {
			in.Probe.MethodsChecked = true
			for _, m := range advertisedMethods(caps) {
				if r := call(m, struct{}{}); errors.Is(r.Err, jsonrpc.MethodNotFound) {
					in.Probe.MethodNotFound = append(in.Probe.MethodNotFound, m)
				}
			}
		}
		if sa := caps.SignedAnnouncement; sa != nil {
			v, err := VerifyAnnouncement(*sa, caps.Primal, caps.Version, caps.Envelope.MethodNames)
			in.Announcement = &AnnouncementCheck{Err: err}
			if err == nil {
				in.Announcement.Verified = &v
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	in.Report = Level(in.Capabilities, &in.Probe)
	return in, nil
}

// advertisedMethods is the methods list when the host sends one, else the
// methods Parse found.
func advertisedMethods(c *Capabilities) []string {
	if c.Envelope.Methods == Present {
		return dedupe(c.Envelope.MethodNames)
	}
	return c.Methods
}
