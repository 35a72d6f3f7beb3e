package host

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/capmesh/capmesh/access"
	"github.com/capmesh/capmesh/chp/chprpc"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/wire"
)

// MethodHealthDrain asks a host to stop taking work and shut down
// gracefully (GD-01): params {"timeout_ms": n}.
const MethodHealthDrain = "health.drain"

// builtinNames are the methods every host answers itself; Register refuses
// them.
var builtinNames = func() map[string]bool {
	m := map[string]bool{
		wire.MethodCapabilitiesList: true, wire.MethodIdentityGet: true,
		wire.MethodHealthLiveness: true, wire.MethodHealthReadiness: true, wire.MethodHealthCheck: true,
		MethodHealthDrain: true,
		"chp.describe":    true, "chp.invoke": true, "chp.replay": true, "chp.verify": true, "chp.export": true,
		"chp.revocations": true, "chp.revoke": true,
	}
	for _, a := range wire.CapabilitiesListAliases {
		m[a] = true
	}
	for _, a := range wire.LivenessAliases {
		m[a] = true
	}
	for _, a := range wire.CheckAliases {
		m[a] = true
	}
	return m
}()

func isBuiltin(name string) bool { return builtinNames[name] }

// builtins returns the built-in surface: capabilities.list and its
// aliases, identity.get, the health triad with its aliases, health.drain
// and the CHP JSON-RPC binding. Everything except drain and chp.* is
// inline: it answers from memory on the connection's reader goroutine.
func (h *Host) builtins() map[string]jsonrpc.Handler {
	m := map[string]jsonrpc.Handler{}
	caps := jsonrpc.Inline(jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return h.tab.Load().capsList, nil
	}))
	m[wire.MethodCapabilitiesList] = caps
	for _, a := range wire.CapabilitiesListAliases {
		m[a] = caps
	}
	m[wire.MethodIdentityGet] = jsonrpc.Inline(jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return h.tab.Load().identity, nil
	}))
	live := jsonrpc.Inline(jsonrpc.HandlerFunc(h.liveness))
	m[wire.MethodHealthLiveness] = live
	for _, a := range wire.LivenessAliases {
		m[a] = live
	}
	m[wire.MethodHealthReadiness] = jsonrpc.Inline(jsonrpc.HandlerFunc(h.readiness))
	check := jsonrpc.Inline(jsonrpc.HandlerFunc(h.check))
	m[wire.MethodHealthCheck] = check
	for _, a := range wire.CheckAliases {
		m[a] = check
	}
	m[MethodHealthDrain] = h.gate(access.OpAdminister, jsonrpc.HandlerFunc(h.drainRPC))
	for name, hd := range chprpc.Handlers(h.b) {
		op := access.OpEvidence
		switch name {
		case "chp.invoke":
			hd = h.guard(hd) // an invocation is work; the others only read
			op = access.OpInvoke
		case "chp.describe":
			op = access.OpDescribe
		}
		m[name] = h.gate(op, hd)
	}
	return m
}

func (h *Host) uptime() uint64 { return uint64(time.Since(h.started) / time.Second) }

// liveness answers {"status":"alive","alive":true,"primal":…,
// "version":…,"uptime_seconds":n} — wire.Liveness, appended by hand
// because it is the probe orchestrators send most often.
func (h *Host) liveness(context.Context, *jsonrpc.Request) (any, error) {
	b := make([]byte, 0, 96+len(h.info.Name)+len(h.info.Version))
	b = append(b, `{"status":"alive","alive":true,"primal":`...)
	b = strconv.AppendQuote(b, h.info.Name)
	b = append(b, `,"version":`...)
	b = strconv.AppendQuote(b, h.info.Version)
	b = append(b, `,"uptime_seconds":`...)
	b = strconv.AppendUint(b, h.uptime(), 10)
	b = append(b, '}')
	return json.RawMessage(b), nil
}

// subsystems reports the state of what the host depends on.
func (h *Host) subsystems() map[string]string {
	s := map[string]string{"evidence": "ok", "serving": "ok"}
	switch {
	case h.drain.draining():
		s["serving"] = "draining"
	case !h.accepting.Load():
		s["serving"] = "starting"
	}
	return s
}

// readiness is ready while the host takes work: listening and not
// draining.
func (h *Host) readiness(context.Context, *jsonrpc.Request) (any, error) {
	sub := h.subsystems()
	return wire.NewReadiness(h.info.Name, h.info.Version, sub["serving"] == "ok", sub), nil
}

// check is healthy while serving normally, degraded while draining.
func (h *Host) check(context.Context, *jsonrpc.Request) (any, error) {
	sub := h.subsystems()
	st := wire.StatusHealthy
	if sub["serving"] != "ok" {
		st = wire.StatusDegraded
	}
	return wire.HealthCheck{
		Status:        st,
		Healthy:       st == wire.StatusHealthy,
		Primal:        h.info.Name,
		Version:       h.info.Version,
		UptimeSeconds: h.uptime(),
		Subsystems:    sub,
	}, nil
}
