package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/capmesh/capmesh/chp/schema"
	"github.com/capmesh/capmesh/conformance/framing"
	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/jsonrpc/jhttp"
	"github.com/capmesh/capmesh/wire"
)

// Options configure an audit. A nil *Options means the defaults.
type Options struct {
	// ConnectTimeout bounds the first connection to a stream endpoint.
	// Default 5 s for an endpoint the caller named (a busy machine must not
	// turn a live host into an unreachable verdict) and ScanConnectTimeout
	// for each socket of an AuditAll scan, where a socket that does not
	// accept promptly is reported rather than waited on. Later connections
	// to a host that answered, and HTTP connections, get ProbeTimeout.
	ConnectTimeout time.Duration
	// ProbeTimeout bounds each call. Default 2 s.
	ProbeTimeout time.Duration
	// HostTimeout bounds the whole audit of one host. Default 60 s.
	HostTimeout time.Duration
	// NoCall skips calling every advertised method (the callability check
	// of Level 2 is then unknown). Calling is the default because the
	// standard's checklist asks for it; a call may have side effects.
	NoCall bool
	// NoCHP skips the CHP suite (no invocations are made).
	NoCHP bool
	// Key is the X-CHP-Key for CHP hosts on HTTP.
	Key string
	// NodeIDs are node ids to try, besides $NODE_ID and common defaults,
	// when checking whether an announcement key is the seed-derived one.
	NodeIDs []string
	// CHPDisabled names capabilities the operator has disabled on the host,
	// so that CHP requirement 9 (skipped execution) can be exercised on a
	// host whose descriptors do not mark them.
	CHPDisabled []string
	// CHPInvokeLimit bounds how many capabilities the CHP suite invokes
	// with an empty payload to find a success and a failure when the host
	// has no conformance fixtures. Default 8.
	CHPInvokeLimit int
	// Cases are the framing cases to run; nil means framing.Cases().
	Cases []framing.Case
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Connect timeouts when Options.ConnectTimeout is zero: one for an
// endpoint named by the caller, one for each socket a directory scan finds.
const (
	NamedConnectTimeout = 5 * time.Second
	ScanConnectTimeout  = 250 * time.Millisecond
)

func (o *Options) connectTimeout() time.Duration {
	if o == nil || o.ConnectTimeout <= 0 {
		return NamedConnectTimeout
	}
	return o.ConnectTimeout
}

func (o *Options) probeTimeout() time.Duration {
	if o == nil || o.ProbeTimeout <= 0 {
		return 2 * time.Second
	}
	return o.ProbeTimeout
}

func (o *Options) hostTimeout() time.Duration {
	if o == nil || o.HostTimeout <= 0 {
		return 60 * time.Second
	}
	return o.HostTimeout
}

func (o *Options) now() time.Time {
	if o == nil || o.Now == nil {
		return time.Now()
	}
	return o.Now()
}

func (o *Options) cases() ([]framing.Case, error) {
	if o != nil && o.Cases != nil {
		return o.Cases, nil
	}
	return framing.Cases()
}

// Audit judges the host at addr against every suite that applies to it.
// It never fails: an unreachable host is a report with Reachable false.
func Audit(ctx context.Context, addr endpoint.Address, o *Options) *HostReport {
	if o == nil {
		o = &Options{}
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, o.hostTimeout())
	defer cancel()
	rep := &HostReport{Endpoint: addr.String(), Announcement: AnnouncementAbsent}
	defer func() { rep.Duration = time.Since(start) }()
	cases, err := o.cases()
	if err != nil {
		rep.Error = err.Error()
		return rep
	}
	h := &hostAudit{addr: addr, o: o, rep: rep}
	if err := h.statSocket(); err != nil {
		rep.Error = err.Error()
		return rep
	}
	if err := h.dial(ctx); err != nil {
		rep.Error = err.Error()
		return rep
	}
	if h.hc != nil {
		defer h.hc.CloseIdleConnections()
	}
	defer h.caller.Close()
	rep.Reachable = true

	if !h.auditWire(ctx) {
		return rep
	}
	h.auditIPC(ctx, cases)
	if !o.NoCHP {
		h.auditCHP(ctx)
	}
	h.auditRegistry(ctx)
	return rep
}

// hostAudit is the audit of one host under way: how it is reached and
// what the wire suite found, which the later suites read.
type hostAudit struct {
	addr endpoint.Address
	o    *Options
	rep  *HostReport

	familyScoped bool // the socket's name carries a family id
	caller       jsonrpc.Caller
	secured      bool         // a BTSP handshake with this process's family seed
	hc           *http.Client // nil unless the endpoint is http(s)
	httpBase     string
	httpCHPHost  *httpCHP // set when the HTTP endpoint is a CHP host
	w            wireOutcome
	listing      *registryListing
}

// statSocket records the socket of a unix endpoint.
func (h *hostAudit) statSocket() error {
	if h.addr.Scheme != "unix" {
		return nil
	}
	info, err := statSocket(h.addr.Path)
	if err != nil {
		return err
	}
	h.rep.Socket = info
	base := strings.TrimSuffix(info.Resolved[strings.LastIndexByte(info.Resolved, '/')+1:], ".sock")
	h.familyScoped = strings.Contains(base, "-")
	return nil
}

// dial connects to the host: a JSON-RPC connection on a socket, an HTTP
// client (and its JSON-RPC bridge) on http(s).
func (h *hostAudit) dial(ctx context.Context) error {
	addr, o := h.addr, h.o
	switch addr.Scheme {
	case "unix", "tcp":
		dctx, dcancel := context.WithTimeout(ctx, o.connectTimeout())
		conn, err := endpoint.DialConn(dctx, addr)
		dcancel()
		if err != nil {
			return err
		}
		if bc, ok := conn.(interface{ PeerFamily() string }); ok && bc.PeerFamily() != "" {
			h.secured = true
		}
		h.caller = jsonrpc.NewClient(conn, nil)
	case "http", "https":
		h.hc = &http.Client{Timeout: o.probeTimeout(), Transport: &http.Transport{
			// HTTP hosts need not be local: the connect bound is for
			// discovering local sockets, not for reaching a web server.
			DialContext:       (&net.Dialer{Timeout: o.probeTimeout()}).DialContext,
			DisableKeepAlives: false,
		}}
		h.httpBase = addr.Scheme + "://" + addr.Host
		path := addr.Path
		if path == "" || path == "/" {
			path = "/jsonrpc"
		}
		h.caller = jhttp.NewClient(h.httpBase+path, h.hc)
	default:
		return fmt.Errorf("cannot audit a %q endpoint", addr.Scheme)
	}
	return nil
}

// auditWire runs the Capability Wire Standard suite and fills in what the
// report says about the host. It returns false when the host turned out
// unreachable (an HTTP endpoint with neither JSON-RPC, CHP nor a registry).
func (h *hostAudit) auditWire(ctx context.Context) bool {
	rep := h.rep
	// HTTP: is it a CHP host? Then a missing JSON-RPC bridge is no failure.
	if h.hc != nil {
		c := &httpCHP{base: h.httpBase, key: h.o.Key, hc: h.hc}
		if probeHTTPCHP(ctx, c) {
			h.httpCHPHost = c
		}
	}
	transport := h.addr.Scheme
	if transport == "https" {
		transport = "http"
	}
	wireChecks, w := auditWire(ctx, h.caller, transport, h.o, h.familyScoped, h.secured)
	h.w = w
	jsonrpcAbsent := h.hc != nil && w.err != nil && !isRPCError(w.err)
	if h.hc != nil {
		c := &httpCHP{base: h.httpBase, key: h.o.Key, hc: h.hc}
		if l, err := listAgents(ctx, c); err == nil {
			h.listing = l
		}
	}
	switch {
	case jsonrpcAbsent && (h.httpCHPHost != nil || h.listing != nil):
		what := "a CHP host on the HTTP binding"
		if h.httpCHPHost == nil {
			what = "an RFC-005 registry (GET /agents)"
		}
		rep.Checks = append(rep.Checks, Check{Suite: SuiteWire, ID: "W.jsonrpc", Requirement: "the host answers JSON-RPC 2.0 (capabilities.list)",
			Source: srcWireLevels, Status: Skip, Reason: what + " without a JSON-RPC bridge at " + h.addr.String()})
	case jsonrpcAbsent:
		rep.Reachable = false
		rep.Error = w.err.Error()
		return false
	default:
		rep.Checks = append(rep.Checks, wireChecks...)
	}
	if in := w.in; in != nil {
		rep.Level, rep.Verified = in.Report.Level, in.Report.Verified
		if in.Capabilities != nil {
			rep.Primal, rep.Version = in.Capabilities.Primal, in.Capabilities.Version
		}
		if rep.Primal == "" && in.Identity != nil {
			rep.Primal, rep.Version = in.Identity.Primal, in.Identity.Version
		}
		if a := in.Announcement; a != nil {
			rep.Announcement = AnnouncementValid
			if a.Err != nil {
				rep.Announcement = AnnouncementInvalid
			} else if c := rep.Check("W.announcement_key"); c != nil && c.Status == Fail {
				rep.Announcement = AnnouncementForgeable
			}
		}
	}
	return true
}

// auditIPC runs IPC v3.1: framing on a fresh connection per case, socket
// hygiene.
func (h *hostAudit) auditIPC(ctx context.Context, cases []framing.Case) {
	rep, w := h.rep, h.w
	if h.addr.Scheme == "unix" || h.addr.Scheme == "tcp" {
		switch {
		case w.btsp:
			rep.Checks = append(rep.Checks, skipFraming(cases, "the socket requires a BTSP handshake before JSON-RPC")...)
		case w.err != nil:
			rep.Checks = append(rep.Checks, skipFraming(cases, "capabilities.list got no answer: "+w.err.Error())...)
		default:
			rep.Checks = append(rep.Checks, auditFraming(ctx, h.addr, h.o, cases)...)
		}
	}
	if rep.Socket != nil {
		domain := ""
		if w.in != nil && w.in.Identity != nil {
			domain = w.in.Identity.Domain
		}
		rep.Checks = append(rep.Checks, auditSocket(rep.Socket, rep.Primal, domain)...)
	}
}

// auditCHP runs CHP over HTTP or over the JSON-RPC binding, when the host
// speaks it.
func (h *hostAudit) auditCHP(ctx context.Context) {
	rep := h.rep
	var t chpTransport
	switch {
	case h.httpCHPHost != nil:
		t = h.httpCHPHost
	case h.w.err == nil && !h.w.btsp:
		t = &rpcCHP{c: h.caller}
	}
	if t == nil {
		return
	}
	dctx, dcancel := context.WithTimeout(ctx, h.o.probeTimeout())
	desc, err := t.describe(dctx)
	dcancel()
	switch {
	case err == nil && declaresNone(desc):
		// The CHP binding is served, but nothing is governed by it:
		// an infrastructure endpoint (a node, a router), not a
		// capability host. Nothing to judge, and nothing passed.
		var d struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(desc, &d)
		rep.Checks = append(rep.Checks, Check{Suite: SuiteCHP, ID: "CHP.1", Requirement: chpChecklist[0].requirement, Source: chpChecklist[0].source,
			Status: Skip, Reason: "the host serves the CHP binding but declares no capabilities: not a CHP capability host, nothing to govern"})
		rep.CHP = &CHPSummary{Binding: t.binding(), HostID: d.ID, NoCapabilities: true}
	case err == nil:
		checks, sum := auditCHP(ctx, t, desc, h.o)
		rep.Checks = append(rep.Checks, checks...)
		rep.CHP = sum
	case errors.Is(err, errNotOffered):
		// Not a CHP host: nothing to report.
	default:
		rep.Checks = append(rep.Checks, Check{Suite: SuiteCHP, ID: "CHP.1", Requirement: chpChecklist[0].requirement, Source: chpChecklist[0].source,
			Status: Fail, Reason: "describe failed: " + err.Error()})
		rep.CHP = &CHPSummary{Binding: t.binding(), Failed: 1}
	}
}

// auditRegistry runs RFC-005 on registries: a Genesis-Mesh NA found by
// auditWire, or a host that advertises ipc.list.
func (h *hostAudit) auditRegistry(ctx context.Context) {
	if h.listing == nil && h.w.in != nil && h.w.in.Capabilities != nil && contains(h.w.in.Capabilities.Methods, "ipc.list") {
		lctx, lcancel := context.WithTimeout(ctx, h.o.probeTimeout())
		l, err := listIPC(lctx, h.caller)
		lcancel()
		if err == nil {
			h.listing = l
		}
	}
	if h.listing != nil {
		h.rep.Checks = append(h.rep.Checks, auditRegistry(h.listing, h.o.now())...)
	}
}

// isRPCError reports whether err is an answer from the host (a JSON-RPC
// error object) rather than a transport failure.
func isRPCError(err error) bool {
	_, ok := jsonrpc.ErrorCode(err)
	return ok
}

// Level is a convenience for tests and tools that only want the wire
// level of a captured capabilities.list result (no live probe).
func Level(result []byte) (wire.Report, error) {
	c, err := wire.Parse(result)
	if err != nil {
		return wire.Report{}, err
	}
	return wire.Level(c, nil), nil
}

// declaresNone reports whether a HostDescriptor is well formed and lists no
// capabilities.
func declaresNone(desc json.RawMessage) bool {
	var d struct {
		Capabilities []json.RawMessage `json:"capabilities"`
	}
	return json.Unmarshal(desc, &d) == nil && len(d.Capabilities) == 0 && schema.Validate("host-descriptor", desc) == nil
}
