package chphttp_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/chphttp"
	"github.com/capmesh/capmesh/chp/schema"
	"github.com/google/go-cmp/cmp"
)

// disabledIDs decodes descriptors as a foreign auditor would and returns the
// ids Disabled reports.
func disabledIDs(t *testing.T, raw []byte) []string {
	t.Helper()
	var listed struct {
		Capabilities []chp.CapabilityDescriptor `json:"capabilities"`
	}
	if err := json.Unmarshal(raw, &listed); err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, c := range listed.Capabilities {
		if c.Disabled() {
			out = append(out, c.ID)
		}
	}
	return out
}

// TestDisabledIsDiscoverable: a disabled capability stays listed, marked
// metadata["io.github.capmesh.enabled"] = false in /capabilities, /host and
// chp.describe — schema-valid, since the schema's status is a maturity level
// with no "disabled" — and the mark follows SetEnabled. Every way a
// descriptor may say "disabled" on input registers it disabled.
func TestDisabledIsDiscoverable(t *testing.T) {
	b := fixtureBoundary(t, nil)
	no := false
	echo := func(_ context.Context, p json.RawMessage) (json.RawMessage, error) { return p, nil }
	for _, c := range []boundary.Capability{
		{Descriptor: chp.CapabilityDescriptor{ID: "off.flag", Version: "1", Description: "x"}, Disabled: true},
		{Descriptor: chp.CapabilityDescriptor{ID: "off.enabled", Version: "1", Description: "x", Enabled: &no}},
		{Descriptor: chp.CapabilityDescriptor{ID: "off.status", Version: "1", Description: "x", Status: "disabled"}},
		{Descriptor: chp.CapabilityDescriptor{ID: "off.meta", Version: "1", Description: "x", Status: "certified",
			Metadata: json.RawMessage(`{"` + chp.EnabledKey + `":false,"team":"a"}`)}},
		// An author's stale mark on an enabled capability is not kept.
		{Descriptor: chp.CapabilityDescriptor{ID: "on.meta", Version: "1", Description: "x",
			Metadata: json.RawMessage(`{"` + chp.EnabledKey + `":true}`)}},
	} {
		c.Handler = echo
		if err := b.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Register(boundary.Capability{Descriptor: chp.CapabilityDescriptor{ID: "bad.status", Version: "1", Description: "x", Status: "retired"},
		Handler: echo}); err == nil || !strings.Contains(err.Error(), "status") {
		t.Errorf("an unknown status registered: %v", err)
	}

	srv := httptest.NewServer(chphttp.Handler(b, nil))
	defer srv.Close()
	get := func(path string) []byte {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var raw json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
			t.Fatal(err)
		}
		return raw
	}
	check := func(want []string) {
		t.Helper()
		for _, path := range []string{"/capabilities", "/host"} {
			raw := get(path)
			if diff := cmp.Diff(want, disabledIDs(t, raw)); diff != "" {
				t.Errorf("%s: disabled (-want +got):\n%s", path, diff)
			}
		}
		rpc, _ := json.Marshal(b.Describe())
		if diff := cmp.Diff(want, disabledIDs(t, rpc)); diff != "" {
			t.Errorf("Describe: disabled (-want +got):\n%s", diff)
		}
		if err := schema.Validate("host-descriptor", b.Describe()); err != nil {
			t.Errorf("host descriptor: %v", err)
		}
		for _, d := range b.Capabilities() {
			if err := schema.Validate("capability-descriptor", d); err != nil {
				t.Errorf("%s: %v", d.ID, err)
			}
			if d.Enabled != nil || d.Status == "disabled" {
				t.Errorf("%s: emitted enabled=%v status=%q", d.ID, d.Enabled, d.Status)
			}
		}
	}
	all := []string{"off.enabled", "off.flag", "off.meta", "off.status"}
	check(all)
	for _, d := range b.Capabilities() {
		switch d.ID {
		case "off.meta":
			if string(d.Metadata) != `{"io.github.capmesh.enabled":false,"team":"a"}` || d.Status != "certified" {
				t.Errorf("off.meta emitted metadata %s status %q", d.Metadata, d.Status)
			}
		case "on.meta", "conformance.echo":
			if string(d.Metadata) != "{}" {
				t.Errorf("%s emitted metadata %s", d.ID, d.Metadata)
			}
		case "conformance.budgeted":
			if !strings.Contains(string(d.Metadata), `"autonomy":`) || strings.Contains(string(d.Metadata), chp.EnabledKey) {
				t.Errorf("budgeted metadata %s", d.Metadata)
			}
		}
	}
	for _, id := range all {
		res, err := b.Invoke(context.Background(), &chp.InvocationEnvelope{CapabilityID: id})
		if err != nil || res.Outcome != chp.OutcomeSkipped {
			t.Errorf("%s: %+v %v, want skipped", id, res, err)
		}
	}

	// The mark follows SetEnabled, both ways, and composes with autonomy.
	if err := b.SetEnabled("off.flag", "1", true); err != nil {
		t.Fatal(err)
	}
	if err := b.SetEnabled("conformance.budgeted", "1.0.0", false); err != nil {
		t.Fatal(err)
	}
	check([]string{"conformance.budgeted", "off.enabled", "off.meta", "off.status"})
	for _, d := range b.Capabilities() {
		if d.ID == "conformance.budgeted" && !strings.Contains(string(d.Metadata), `"autonomy":`) {
			t.Errorf("disabling dropped autonomy: %s", d.Metadata)
		}
	}
	if res, _ := b.Invoke(context.Background(), &chp.InvocationEnvelope{CapabilityID: "off.flag"}); res.Outcome != chp.OutcomeSuccess {
		t.Errorf("re-enabled: %s", res.Outcome)
	}
	_ = b.SetEnabled("conformance.budgeted", "1.0.0", true)
	check([]string{"off.enabled", "off.meta", "off.status"})
}
