package node_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/node"
	"github.com/capmesh/capmesh/registry"
)

// TestMetricsExposition starts a node with its HTTP listener, drives calls
// through it — a routed call served and one refused by the provider, CHP
// invocations that succeed and are denied, unknown methods, made-up
// routed methods — then scrapes /metrics over HTTP, parses the text
// format and checks every family of docs/operations.md, with bounded
// labels: made-up names count under "other".
func TestMetricsExposition(t *testing.T) {
	env(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Memory: true, TCP: "127.0.0.1:0", HTTP: "127.0.0.1:0", Version: "1.0.0", CHPFixtures: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()
	sock := n.Addr("unix")
	h, err := host.New(host.Info{Name: "echoer", Version: "1.0.0", Domain: "echo"}, &host.Config{Ephemeral: true, Node: "unix://" + sock})
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Register(h, "echo.say", func(_ context.Context, in struct{ Text string }) (string, error) {
		return "echo: " + in.Text, nil
	}); err != nil {
		t.Fatal(err)
	}
	hctx, hcancel := context.WithCancel(ctx)
	hdone := make(chan error, 1)
	go func() { hdone <- h.Serve(hctx) }()
	stopHost := sync.OnceFunc(func() { hcancel(); <-hdone })
	defer stopHost()
	for len(n.Registry().Find("echo.say", registry.FindOptions{})) == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the host never appeared in the registry")
		case <-time.After(20 * time.Millisecond):
		}
	}

	uc, err := endpoint.Dial(ctx, "unix://"+sock)
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	tc, err := endpoint.Dial(ctx, "tcp://"+n.Addr("tcp"))
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	var s string
	if err := uc.Call(ctx, "echo.say", map[string]any{"Text": "hi"}, &s); err != nil {
		t.Fatalf("routed call: %v", err)
	}
	if err := tc.Call(ctx, "echo.say", map[string]any{"Text": "hi"}, &s); err == nil {
		t.Fatal("an anonymous routed call was served")
	}
	var res map[string]any
	for _, capID := range []string{"conformance.echo", "conformance.risky", "conformance.risky"} {
		if err := uc.Call(ctx, "chp.invoke", map[string]any{"capability_id": capID, "payload": map[string]any{"value": 1}}, &res); err != nil {
			t.Logf("chp.invoke %s: %v", capID, err) // a denial may be an error
		}
	}
	for _, m := range []string{"nosuchmethod", "secret-corr-4711", "zz.made_up_1", "zz.made_up_2"} {
		if err := uc.Call(ctx, m, nil, &res); err == nil {
			t.Fatalf("%s answered", m)
		}
	}

	fams := scrape(t, ctx, "http://"+n.Addr("http")+"/metrics")
	for _, name := range []string{
		"capmesh_rpc_requests_total", "capmesh_rpc_request_duration_seconds", "capmesh_rpc_requests_in_flight",
		"capmesh_rpc_connections", "capmesh_rpc_connections_accepted_total", "capmesh_rpc_limit_refusals_total",
		"capmesh_chp_invocations_total", "capmesh_chp_denials_total",
		"capmesh_evidence_commit_duration_seconds", "capmesh_evidence_commit_events", "capmesh_store_errors_total",
		"capmesh_registry_entries", "capmesh_registry_capabilities", "capmesh_registry_revision",
		"capmesh_registry_changes_total", "capmesh_registry_trust_changes_total",
		"capmesh_router_calls_total", "capmesh_router_hops",
		"go_goroutines", "process_open_fds",
	} {
		if fams[name] == nil {
			t.Errorf("family %s missing", name)
		}
	}
	want := []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"capmesh_rpc_requests_total", map[string]string{"method": "echo.say", "outcome": "ok"}, 1},
		{"capmesh_rpc_requests_total", map[string]string{"method": "echo.say", "outcome": "unauthorized"}, 1},
		{"capmesh_rpc_requests_total", map[string]string{"method": "chp.invoke"}, 3},
		{"capmesh_rpc_requests_total", map[string]string{"method": "other", "outcome": "method_not_found"}, 2},
		{"capmesh_rpc_requests_total", map[string]string{"method": "other"}, 4},
		{"capmesh_rpc_connections", map[string]string{"transport": "unix"}, 2}, // the host's and ours
		{"capmesh_rpc_connections", map[string]string{"transport": "tcp"}, 1},
		{"capmesh_rpc_connections", map[string]string{"transport": "http"}, 1}, // this scrape
		{"capmesh_rpc_connections_accepted_total", map[string]string{"transport": "tcp"}, 1},
		{"capmesh_chp_invocations_total", map[string]string{"outcome": "success"}, 1},
		{"capmesh_chp_invocations_total", map[string]string{"outcome": "denied"}, 2},
		{"capmesh_chp_denials_total", map[string]string{"code": "policy_blocked"}, 2},
		{"capmesh_evidence_commit_duration_seconds", nil, 3},
		{"capmesh_evidence_commit_events", nil, 3},
		{"capmesh_registry_entries", nil, 1},
		{"capmesh_registry_changes_total", map[string]string{"kind": "registered"}, 1},
		{"capmesh_router_calls_total", map[string]string{"outcome": "ok"}, 1},
		{"capmesh_router_calls_total", map[string]string{"outcome": "provider_error"}, 1},
		{"capmesh_router_calls_total", map[string]string{"outcome": "no_provider"}, 2},
		{"capmesh_router_hops", nil, 2},
	}
	for _, w := range want {
		if got := sum(fams[w.name], w.labels); got < w.min {
			t.Errorf("%s%v = %v, want at least %v", w.name, w.labels, got, w.min)
		}
	}
	// Bounded labels: no made-up method name, no correlation-like value.
	for _, m := range fams["capmesh_rpc_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if v := l.GetValue(); strings.Contains(v, "made_up") || strings.Contains(v, "4711") || v == "nosuchmethod" {
				t.Errorf("unbounded label %s=%q", l.GetName(), v)
			}
		}
	}
	if got := sum(fams["capmesh_rpc_requests_in_flight"], nil); got != 0 {
		t.Errorf("in flight after the calls returned: %v", got)
	}
}

// scrape reads url and parses the Prometheus text format.
func scrape(t *testing.T, ctx context.Context, url string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics: %s: %s", resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the exposition: %v", err)
	}
	return fams
}

// sum adds the values of the family's metrics whose labels include want:
// counters and gauges by value, histograms by sample count.
func sum(f *dto.MetricFamily, want map[string]string) float64 {
	var total float64
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Histogram != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			total += m.GetUntyped().GetValue()
		}
	}
	return total
}
