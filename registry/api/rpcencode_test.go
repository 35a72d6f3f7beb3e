package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry"
	"github.com/google/go-cmp/cmp"
)

// TestProviderEncoding holds the hand-written provider encoder to what
// encoding/json writes for the same records, escapes included.
func TestProviderEncoding(t *testing.T) {
	at := time.Date(2026, 7, 1, 12, 0, 0, 123456789, time.UTC)
	es := []registry.Entry{
		{Key: "local:beardog", Name: "beardog", Capabilities: []string{"crypto.sign"}, Endpoint: "unix:///run/user/1000/biomeos/beardog.sock",
			Source: registry.SourceLocal, RegisteredAt: at, ExpiresAt: at.Add(90 * time.Second), Trust: registry.Verdict{Trusted: true, Reason: "local peer uid 1000, identity.get matched"}},
		{Key: "frFHgD2h7pTJ9c9dXqcWfOa5Lvx1u9afoo3EvneqeBA=", Name: "plan<ner>&\"1\"\u2028é\x01", Capabilities: []string{}, Endpoint: "tcp://[::1]:7448",
			Source: registry.SourceDescriptor, RegisteredAt: at.In(time.FixedZone("", 7200)), ExpiresAt: at.Add(time.Hour), Trust: registry.Verdict{Trusted: false, Reason: "node key is not enrolled"},
			Descriptor: json.RawMessage(`{"agent_id":"planner-1","metadata":{"x":"\u00e9"}}`)},
		{Key: "k", Name: "", Capabilities: nil, Endpoint: "http://h/p?a=1&b=<2>", Source: registry.SourceDescriptor},
	}
	view := func(e registry.Entry) providerView {
		p := toProvider(e)
		if e.Key == "k" {
			p.Dialable = undialable // "dialable": false, as for an entry of another machine
		}
		return p
	}
	views := make([]providerView, 0, len(es))
	for _, e := range es {
		views = append(views, view(e))
	}
	want, err := json.Marshal(views)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(appendProviders(nil, es, view))); diff != "" {
		t.Errorf("provider encoding (-encoding/json +fast):\n%s", diff)
	}
	if got := string(appendProviders(nil, nil, view)); got != "[]" {
		t.Errorf("empty: %s", got)
	}
}
