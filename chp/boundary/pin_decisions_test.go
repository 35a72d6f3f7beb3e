package boundary

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/evidence"
)

// goid is the id of the calling goroutine, from its stack header.
func goid() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := strings.Fields(string(buf))
	if len(f) < 2 || f[0] != "goroutine" {
		panic("unexpected stack header: " + string(buf))
	}
	return f[1]
}

// TestHandlerGoroutine: a handler runs on the goroutine that called Invoke
// unless its capability has timeout_s; then it runs on another one, so the
// host can answer when the handler ignores cancellation.
func TestHandlerGoroutine(t *testing.T) {
	b, err := New(Config{HostID: "h", Store: evidence.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan string, 1)
	handler := func(context.Context, json.RawMessage) (json.RawMessage, error) {
		ran <- goid()
		return json.RawMessage(`{}`), nil
	}
	timeout := 30.0
	for _, c := range []Capability{
		{Descriptor: chp.CapabilityDescriptor{ID: "g.plain", Version: "1", Description: "x"}, Handler: handler},
		{Descriptor: chp.CapabilityDescriptor{ID: "g.timed", Version: "1", Description: "x", TimeoutS: &timeout}, Handler: handler},
	} {
		if err := b.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		id   string
		same bool
	}{{"g.plain", true}, {"g.timed", false}} {
		res, err := b.Invoke(context.Background(), &chp.InvocationEnvelope{CapabilityID: c.id})
		if err != nil || res.Outcome != chp.OutcomeSuccess {
			t.Fatalf("%s: %v %+v", c.id, err, res)
		}
		if got := <-ran == goid(); got != c.same {
			t.Errorf("%s: handler on the caller's goroutine = %v, want %v", c.id, got, c.same)
		}
	}
}

// TestActionLimitSpansCapabilities: the action limit counts the
// execution_started events of every capability on the correlation, not
// only the limited one's; denials consume nothing.
func TestActionLimitSpansCapabilities(t *testing.T) {
	b := fixtureBoundary(t, evidence.NewMemory())
	inv := func(capID, corr string) *chp.InvocationResult {
		t.Helper()
		res, err := b.Invoke(context.Background(), &chp.InvocationEnvelope{CapabilityID: capID,
			Correlation: chp.CorrelationContext{CorrelationID: corr}, Payload: json.RawMessage(`{"value":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// conformance.budgeted has action_limit 1.
	if r := inv("conformance.echo", "shared"); r.Outcome != chp.OutcomeSuccess {
		t.Fatalf("echo: %s", r.Outcome)
	}
	r := inv("conformance.budgeted", "shared")
	if r.Outcome != chp.OutcomeDenied || r.Denial == nil || r.Denial.Code != chp.CodeBudgetExceeded {
		t.Fatalf("budgeted after echo on the same correlation: %s %+v", r.Outcome, r.Denial)
	}
	if r := inv("conformance.budgeted", "fresh"); r.Outcome != chp.OutcomeSuccess {
		t.Fatalf("budgeted on a fresh correlation: %s %+v", r.Outcome, r.Denial)
	}
}

// TestKeyScopeBeforeReplay: a caller whose key is scoped to other
// capabilities replaying another caller's invocation_id gets a processed
// policy_blocked denial with evidence, never the recorded result.
func TestKeyScopeBeforeReplay(t *testing.T) {
	b := fixtureBoundary(t, evidence.NewMemory())
	owner := WithCaller(context.Background(), NewCaller("owner", "api_key", nil))
	env := func(corr string) *chp.InvocationEnvelope {
		return &chp.InvocationEnvelope{CapabilityID: "conformance.echo", InvocationID: "inv-secret",
			Correlation: chp.CorrelationContext{CorrelationID: corr}, Payload: json.RawMessage(`{"value":"secret"}`)}
	}
	first, err := b.Invoke(owner, env("owner-corr"))
	if err != nil || first.Outcome != chp.OutcomeSuccess {
		t.Fatalf("owner's call: %v %+v", err, first)
	}
	scoped := WithCaller(context.Background(), NewCaller("scoped", "api_key", []string{"conformance.fail"}))
	res, err := b.Invoke(scoped, env("scoped-corr"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Replayed || bytes.Contains(res.Data, []byte("secret")) || res.Outcome != chp.OutcomeDenied ||
		res.Denial == nil || res.Denial.Code != chp.CodePolicyBlocked {
		t.Fatalf("scoped replay: %+v (denial %+v)", res, res.Denial)
	}
	if got := eventTypes(t, b, "scoped-corr"); len(got) == 0 || got[len(got)-1] != chp.EventDenied {
		t.Fatalf("scoped replay evidence: %v", got)
	}
}

// TestEvidenceEventShape: every event is chp-event-hash-v2, carries a
// host-constructed payload (never the invocation's payload), no fractional
// JSON number (scores and spend are strings) and an RFC 3339 UTC timestamp
// with microseconds.
func TestEvidenceEventShape(t *testing.T) {
	b := fixtureBoundary(t, evidence.NewMemory())
	const marker = "caller-payload-marker"
	for _, capID := range []string{"conformance.echo", "conformance.fail", "conformance.budgeted", "conformance.budgeted", "conformance.unsafe"} {
		if _, err := b.Invoke(context.Background(), &chp.InvocationEnvelope{CapabilityID: capID,
			Correlation: chp.CorrelationContext{CorrelationID: "shape"}, Payload: json.RawMessage(`{"value":"` + marker + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := b.Replay(context.Background(), chp.ReplayQuery{CorrelationID: "shape"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Events) < 10 {
		t.Fatalf("only %d events", len(res.Events))
	}
	ts := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)
	for _, raw := range res.Events {
		var ev chp.EvidenceEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.HashScheme != chp.EventHashV2 {
			t.Errorf("%s: hash_scheme %q", ev.EventType, ev.HashScheme)
		}
		if !ts.MatchString(ev.Timestamp) {
			t.Errorf("%s: timestamp %q", ev.EventType, ev.Timestamp)
		}
		if bytes.Contains(ev.Payload, []byte(marker)) {
			t.Errorf("%s: the invocation payload reached evidence: %s", ev.EventType, ev.Payload)
		}
		dec := json.NewDecoder(bytes.NewReader(ev.Payload))
		dec.UseNumber()
		var tree any
		if err := dec.Decode(&tree); err != nil {
			t.Fatal(err)
		}
		if n := fractional(tree); n != "" {
			t.Errorf("%s: payload number %s is not a fixed-precision string: %s", ev.EventType, n, ev.Payload)
		}
	}
}

// fractional returns a JSON number in v written with a fraction or an
// exponent, "" if none.
func fractional(v any) string {
	switch v := v.(type) {
	case json.Number:
		if strings.ContainsAny(string(v), ".eE") {
			return string(v)
		}
	case map[string]any:
		for _, e := range v {
			if n := fractional(e); n != "" {
				return n
			}
		}
	case []any:
		for _, e := range v {
			if n := fractional(e); n != "" {
				return n
			}
		}
	}
	return ""
}

// TestHandlerTimeoutOutcomes: timeout_s cancels the handler's context; one
// that returns after cancellation is a failure of type timeout, one that
// ignores it past the grace is indeterminate.
func TestHandlerTimeoutOutcomes(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	b, err := New(Config{HostID: "h", Store: evidence.NewMemory(), TimeoutGrace: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	timeout := 0.02
	for _, c := range []Capability{
		{Descriptor: chp.CapabilityDescriptor{ID: "t.obeys", Version: "1", Description: "x", TimeoutS: &timeout},
			Handler: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			}},
		{Descriptor: chp.CapabilityDescriptor{ID: "t.ignores", Version: "1", Description: "x", TimeoutS: &timeout},
			Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) {
				<-release
				return json.RawMessage(`{}`), nil
			}},
	} {
		if err := b.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	res, err := b.Invoke(context.Background(), &chp.InvocationEnvelope{CapabilityID: "t.obeys"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != chp.OutcomeFailure || res.Error == nil || res.Error.Type != "timeout" {
		t.Fatalf("handler that returns on cancellation: %s %+v", res.Outcome, res.Error)
	}
	res, err = b.Invoke(context.Background(), &chp.InvocationEnvelope{CapabilityID: "t.ignores"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != chp.OutcomeIndeterminate || res.Error == nil || res.Error.Type != "timeout" {
		t.Fatalf("handler that ignores cancellation: %s %+v", res.Outcome, res.Error)
	}
}
