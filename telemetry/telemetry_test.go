package telemetry_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/jsonrpc"
	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/telemetry"
)

// gather returns the families of m by name.
func gather(t *testing.T, m *telemetry.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// labelValues lists the values of label name in family f, with the
// series' value (counters, gauges) or sample count (histograms).
func labelValues(f *dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() != name {
				continue
			}
			switch {
			case m.Counter != nil:
				out[l.GetValue()] += m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[l.GetValue()] += m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[l.GetValue()] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// TestMethodLabelsAreBounded: a method is labelled by name when
// registered or once it succeeded, at most MaxMethods names; failures of
// names never seen to succeed, unknown methods and names past the cap
// count as "other".
func TestMethodLabelsAreBounded(t *testing.T) {
	m := telemetry.New(telemetry.Options{Methods: []string{"health.liveness"}, MaxMethods: 2, NoRuntime: true})
	o := m.RPC()
	o.OnRequest("health.liveness", jsonrpc.InvalidParams, time.Millisecond) // registered: by name even failing
	o.OnRequest("kv.get", jsonrpc.InternalError, time.Millisecond)          // not yet succeeded: other
	o.OnRequest("kv.get", 0, time.Millisecond)                              // succeeds: admitted (2 of 2)
	o.OnRequest("kv.get", jsonrpc.InternalError, time.Millisecond)          // now by name
	o.OnRequest("kv.put", 0, time.Millisecond)                              // past the cap: other
	o.OnRequest("", jsonrpc.MethodNotFound, 0)                              // unknown: other
	o.OnRequest("x.y", -1234, time.Millisecond)                             // an application code
	fams := gather(t, m)
	req := fams["capmesh_rpc_requests_total"]
	got := labelValues(req, "method")
	want := map[string]float64{"health.liveness": 1, "kv.get": 2, telemetry.Other: 4}
	if len(got) != len(want) {
		t.Fatalf("methods %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("method %q: %v, want %v", k, got[k], v)
		}
	}
	outcomes := labelValues(req, "outcome")
	for k, v := range map[string]float64{"ok": 2, "invalid_params": 1, "internal_error": 2, "method_not_found": 1, "application_error": 1} {
		if outcomes[k] != v {
			t.Errorf("outcome %q: %v, want %v (all %v)", k, outcomes[k], v, outcomes)
		}
	}
	// No latency for an unknown method: nothing ran.
	if n := labelValues(fams["capmesh_rpc_request_duration_seconds"], "method")[telemetry.Other]; n != 3 {
		t.Errorf("latency samples under other: %v, want 3 (kv.get's first failure, kv.put, x.y)", n)
	}
}

// TestChpAndRegistryLabelsAreBounded: denial codes outside the reserved
// set are "other"; a connection of an unknown transport is "other".
func TestChpAndRegistryLabelsAreBounded(t *testing.T) {
	m := telemetry.New(telemetry.Options{NoRuntime: true})
	c := m.CHP()
	c.OnInvocation(chp.OutcomeDenied, chp.CodePolicyBlocked)
	c.OnInvocation(chp.OutcomeDenied, "corr-1234-custom")
	c.OnInvocation(chp.OutcomeSuccess, "")
	c.OnEvidenceCommit(3, 2*time.Millisecond, nil)
	c.OnEvidenceCommit(2, time.Millisecond, context.DeadlineExceeded)
	m.RPC().OnConn("vsock", 1)
	fams := gather(t, m)
	codes := labelValues(fams["capmesh_chp_denials_total"], "code")
	if len(codes) != 2 || codes[chp.CodePolicyBlocked] != 1 || codes[telemetry.Other] != 1 {
		t.Errorf("denial codes %v", codes)
	}
	if got := labelValues(fams["capmesh_chp_invocations_total"], "outcome"); got["denied"] != 2 || got["success"] != 1 {
		t.Errorf("outcomes %v", got)
	}
	if n := fams["capmesh_evidence_commit_events"].GetMetric()[0].GetHistogram().GetSampleSum(); n != 3 {
		t.Errorf("commit events sum %v, want 3 (the failed commit is a store error)", n)
	}
	if got := labelValues(fams["capmesh_store_errors_total"], "store"); got["evidence"] != 1 {
		t.Errorf("store errors %v", got)
	}
	if got := labelValues(fams["capmesh_rpc_connections"], "transport"); got[telemetry.Other] != 1 || !slices.Equal(sortedKeys(got), []string{"http", telemetry.Other, "tcp", "unix"}) {
		t.Errorf("connections %v", got)
	}
}

func sortedKeys(m map[string]float64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestRegistrySize: the watched registry's size is read at scrape time.
func TestRegistrySize(t *testing.T) {
	m := telemetry.New(telemetry.Options{NoRuntime: true})
	if _, ok := gather(t, m)["capmesh_registry_entries"]; ok {
		t.Fatal("registry series without a registry")
	}
	n, err := registry.NewNode(registry.Config{Observer: m.RegistryObserver(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	m.WatchRegistry(n)
	fams := gather(t, m)
	for _, name := range []string{"capmesh_registry_entries", "capmesh_registry_capabilities", "capmesh_registry_revision"} {
		if f := fams[name]; f == nil || len(f.GetMetric()) != 1 {
			t.Errorf("%s: %v", name, f)
		}
	}
}
