package conformance_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/chphttp"
	"github.com/capmesh/capmesh/conformance"
	"github.com/capmesh/capmesh/endpoint"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/registry/descriptor"
)

func statuses(r *conformance.HostReport, suite string) map[string]conformance.Status {
	out := map[string]conformance.Status{}
	for _, c := range r.Suite(suite) {
		out[c.ID] = c.Status
	}
	return out
}

// TestCHPOverHTTP audits a CHP host on the normative HTTP binding (the
// conformance fixture profile behind an X-CHP-Key): all nine requirements
// are exercised over HTTP, the chain verifies offline, and the missing
// JSON-RPC bridge is not held against it.
func TestCHPOverHTTP(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	b, err := boundary.New(boundary.Config{HostID: "http-fixtures", Store: evidence.NewMemory(), Key: key,
		Policy: boundary.FixturePolicy(), Safety: boundary.FixtureSafety()})
	if err != nil {
		t.Fatal(err)
	}
	if err := boundary.RegisterFixtures(b); err != nil {
		t.Fatal(err)
	}
	if err := b.SetEnabled("conformance.stream", "1.0.0", false); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(chphttp.Handler(b, &chphttp.Options{SharedKeys: []string{"k"}}))
	defer srv.Close()
	addr, err := endpoint.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}

	// The disabled capability is found from its descriptor (the boundary
	// marks it), and when the operator names it too.
	for _, disabled := range [][]string{nil, {"conformance.stream"}} {
		rep := conformance.Audit(context.Background(), addr, &conformance.Options{Key: "k", CHPDisabled: disabled})
		if !rep.Reachable || rep.CHP == nil {
			t.Fatalf("not audited as CHP: %+v", rep)
		}
		want := map[string]conformance.Status{"CHP.1": conformance.Pass, "CHP.2": conformance.Pass, "CHP.3": conformance.Pass,
			"CHP.4": conformance.Pass, "CHP.5": conformance.Pass, "CHP.6": conformance.Pass, "CHP.7": conformance.Pass,
			"CHP.8": conformance.Pass, "CHP.9": conformance.Pass, "CHP.chain": conformance.Pass}
		if diff := cmp.Diff(want, statuses(rep, conformance.SuiteCHP)); diff != "" {
			t.Errorf("--chp-disabled %v: CHP checks (-want +got):\n%s\n%v", disabled, diff, rep.Suite(conformance.SuiteCHP))
		}
		if rep.CHP.Binding != "http" || rep.CHP.Passed != 9 || !rep.CHP.OK() {
			t.Errorf("summary %+v", rep.CHP)
		}
		if c := rep.Check("W.jsonrpc"); c == nil || c.Status != conformance.Skip {
			t.Errorf("W.jsonrpc = %+v, want skip", c)
		}
		if ok, why := rep.Meets(conformance.Requirement{CHP: true}); !ok {
			t.Errorf("--require-chp fails: %s", why)
		}
	}

	// Without the key every authenticated route answers 401: the audit
	// says so rather than passing.
	rep := conformance.Audit(context.Background(), addr, nil)
	if rep.CHP == nil || rep.CHP.OK() {
		t.Fatalf("keyless audit passed CHP: %+v", rep.CHP)
	}
	if c := rep.Check("CHP.1"); c == nil || c.Status != conformance.Fail {
		t.Errorf("CHP.1 = %+v", c)
	}
}

// TestRFC005Registry: a Genesis-Mesh style registry (GET /agents) serving
// a valid descriptor, a tampered one and an expired one fails the
// signature and TTL rules for the right descriptors.
func TestRFC005Registry(t *testing.T) {
	now := time.Now()
	mk := func(id string, caps []string, at time.Time, ttl time.Duration) *descriptor.Descriptor {
		pub, priv, _ := ed25519.GenerateKey(rand.Reader)
		d := descriptor.New(id, "USG", pub, caps, descriptor.Endpoint{Host: "10.0.0.4", Port: 8443, Scheme: "wss"}, at, ttl)
		if err := d.Sign(priv); err != nil {
			t.Fatal(err)
		}
		return d
	}
	good := mk("llm-1", []string{"llm:chat"}, now, time.Hour)
	tampered := mk("llm-2", []string{"llm:chat"}, now, time.Hour)
	tampered.Capabilities = []string{"llm:chat", "kb:security"}
	expired := mk("llm-3", []string{"kb:security"}, now.Add(-2*time.Hour), time.Hour)
	var agents []any
	for _, d := range []*descriptor.Descriptor{good, tampered, expired} {
		agents = append(agents, d.Object())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /agents", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"agents": agents, "count": len(agents)})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	addr, _ := endpoint.Parse(srv.URL)
	rep := conformance.Audit(context.Background(), addr, nil)
	got := statuses(rep, conformance.SuiteRFC005)
	want := map[string]conformance.Status{"R5.signature": conformance.Fail, "R5.ttl": conformance.Fail, "R5.trust": conformance.Skip}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("RFC-005 checks (-want +got):\n%s", diff)
	}
	if c := rep.Check("R5.signature"); !contains(c.Reason, `"llm-2"`) || contains(c.Reason, `"llm-1"`) {
		t.Errorf("signature reason names the wrong descriptors: %s", c.Reason)
	}
	if c := rep.Check("R5.ttl"); !contains(c.Reason, `"llm-3"`) || contains(c.Reason, `"llm-1"`) {
		t.Errorf("ttl reason names the wrong descriptors: %s", c.Reason)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
