package boundary

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/schema"
	"github.com/capmesh/capmesh/evidence"
	"github.com/google/go-cmp/cmp"
)

func fixtureBoundary(t *testing.T, store evidence.Store) *Boundary {
	t.Helper()
	b, err := New(Config{HostID: "test-host", Store: store, Policy: FixturePolicy(), Safety: FixtureSafety()})
	if err != nil {
		t.Fatal(err)
	}
	if err := RegisterFixtures(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func eventTypes(t *testing.T, b *Boundary, corr string) []string {
	t.Helper()
	res, err := b.Replay(context.Background(), chp.ReplayQuery{CorrelationID: corr})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range res.Events {
		var ev chp.EvidenceEvent
		if err := json.Unmarshal(e, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Correlation.CorrelationID != corr {
			t.Fatalf("event of %s in %s", ev.Correlation.CorrelationID, corr)
		}
		out = append(out, ev.EventType)
	}
	return out
}

func TestPipelineFixtures(t *testing.T) {
	safety := []string{chp.EventSafetyStarted, chp.EventSafetyCompleted, chp.EventSafetyApproved}
	cases := []struct {
		name    string
		capID   string
		payload string
		mode    string
		outcome chp.Outcome
		code    string
		retry   bool
		events  []string
	}{
		{"echo", "conformance.echo", `{"value":"x"}`, "", chp.OutcomeSuccess, "", false, append(safety, chp.EventStarted, chp.EventCompleted)},
		{"fail", "conformance.fail", `{}`, "", chp.OutcomeFailure, "", false, append(safety, chp.EventStarted, chp.EventFailed)},
		{"guarded", "conformance.guarded", `{}`, "", chp.OutcomeDenied, chp.CodeInvariantFailed, false, []string{chp.EventDenied}},
		{"unknown", "no.such.cap", `{}`, "", chp.OutcomeDenied, chp.CodeCapabilityNotFound, false, []string{chp.EventDenied}},
		{"empty id", "  ", `{}`, "", chp.OutcomeDenied, chp.CodeCapabilityNotFound, false, []string{chp.EventDenied}},
		{"mode", "conformance.echo", `{}`, "async", chp.OutcomeDenied, chp.CodeUnsupportedMode, false, []string{chp.EventDenied}},
		{"approval", "conformance.approval", `{}`, "", chp.OutcomeDenied, chp.CodeApprovalRequired, true, []string{chp.EventApprovalRequested, chp.EventDenied}},
		{"risky", "conformance.risky", `{}`, "", chp.OutcomeDenied, chp.CodePolicyBlocked, false, []string{chp.EventDenied}},
		{"unsafe", "conformance.unsafe", `{}`, "", chp.OutcomeDenied, chp.CodeSafetyBlocked, false,
			[]string{chp.EventSafetyStarted, chp.EventSafetyCompleted, chp.EventSafetyTriggered, chp.EventSafetyBlocked, chp.EventDenied}},
	}
	b := fixtureBoundary(t, evidence.NewMemory())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			corr := "corr-" + strings.ReplaceAll(c.name, " ", "-")
			env := &chp.InvocationEnvelope{CapabilityID: c.capID, Payload: json.RawMessage(c.payload), Mode: c.mode,
				Correlation: chp.CorrelationContext{CorrelationID: corr}}
			res, err := b.Invoke(context.Background(), env)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != c.outcome || res.Success != (c.outcome == chp.OutcomeSuccess) {
				t.Fatalf("outcome %s success %v, want %s", res.Outcome, res.Success, c.outcome)
			}
			if c.code != "" && (res.Denial == nil || res.Denial.Code != c.code || res.Denial.Retryable != c.retry) {
				t.Fatalf("denial %+v, want %s retryable=%v", res.Denial, c.code, c.retry)
			}
			if res.Correlation.CorrelationID != corr {
				t.Errorf("correlation overwritten: %s", res.Correlation.CorrelationID)
			}
			if diff := cmp.Diff(c.events, eventTypes(t, b, corr)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if len(res.EvidenceIDs) != len(c.events) {
				t.Errorf("evidence_ids %d, want %d", len(res.EvidenceIDs), len(c.events))
			}
			if err := schema.Validate("invocation-result", res); err != nil {
				t.Errorf("emitted result violates its schema: %v", err)
			}
		})
	}
}

func TestBudgetAndSkipAndReplay(t *testing.T) {
	b := fixtureBoundary(t, evidence.NewMemory())
	ctx := context.Background()
	inv := func(capID, corr, id string) *chp.InvocationResult {
		t.Helper()
		res, err := b.Invoke(ctx, &chp.InvocationEnvelope{CapabilityID: capID, InvocationID: id, Correlation: chp.CorrelationContext{CorrelationID: corr}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if r := inv("conformance.budgeted", "budget", ""); r.Outcome != chp.OutcomeSuccess {
		t.Fatalf("first budgeted call: %s", r.Outcome)
	}
	r := inv("conformance.budgeted", "budget", "")
	if r.Outcome != chp.OutcomeDenied || r.Denial.Code != chp.CodeBudgetExceeded || !r.Denial.Retryable {
		t.Fatalf("second budgeted call: %+v", r.Denial)
	}
	// A denial or skip does not consume budget: only execution_started counts.
	got := eventTypes(t, b, "budget")
	want := []string{chp.EventSafetyStarted, chp.EventSafetyCompleted, chp.EventSafetyApproved, chp.EventStarted, chp.EventCompleted, chp.EventBudgetExceeded, chp.EventDenied}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("budget events (-want +got):\n%s", diff)
	}
	// Gate 3: disabled is a skip with capability_disabled in the denial slot.
	if err := b.SetEnabled("conformance.echo", "1.0.0", false); err != nil {
		t.Fatal(err)
	}
	r = inv("conformance.echo", "skip", "")
	if r.Outcome != chp.OutcomeSkipped || r.Success || r.Denial == nil || r.Denial.Code != chp.CodeCapabilityDisabled {
		t.Fatalf("disabled: %+v", r)
	}
	if diff := cmp.Diff([]string{chp.EventSkipped}, eventTypes(t, b, "skip")); diff != "" {
		t.Error(diff)
	}
	_ = b.SetEnabled("conformance.echo", "1.0.0", true)
	// Gate 0: the same invocation_id replays the recorded result, no new evidence.
	first := inv("conformance.echo", "idem", "inv-fixed")
	second := inv("conformance.echo", "idem", "inv-fixed")
	if first.Replayed || !second.Replayed || string(first.Data) != string(second.Data) {
		t.Fatalf("replay: first %+v second %+v", first, second)
	}
	if n := len(eventTypes(t, b, "idem")); n != 5 {
		t.Errorf("replayed invocation added evidence: %d events", n)
	}
}

func TestCorrelationGenerated(t *testing.T) {
	b := fixtureBoundary(t, evidence.NewMemory())
	for _, body := range []string{`{"capability_id":"conformance.echo"}`, `{"capability_id":"conformance.echo","correlation":{"correlation_id":""}}`,
		`{"capability_id":"conformance.echo","correlation_id":"lifted","arguments":{"value":1}}`} {
		env, err := chp.ParseEnvelope([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		res, err := b.Invoke(context.Background(), env)
		if err != nil {
			t.Fatal(err)
		}
		corr := res.Correlation.CorrelationID
		if corr == "" || (strings.Contains(body, "lifted") && corr != "lifted") {
			t.Fatalf("%s: correlation %q", body, corr)
		}
		if strings.Contains(body, "lifted") && string(res.Data) != `{"echo":1}` {
			t.Errorf("arguments not accepted as payload: %s", res.Data)
		}
		if len(eventTypes(t, b, corr)) == 0 {
			t.Errorf("%s: no evidence under the generated correlation", body)
		}
	}
	for _, bad := range []string{`[]`, `{"payload":[1]}`, `{"subject":"x"}`, `{"correlation":5}`, `{} {}`} {
		if _, err := chp.ParseEnvelope([]byte(bad)); !errors.Is(err, chp.ErrBadEnvelope) {
			t.Errorf("%s: err %v, want ErrBadEnvelope", bad, err)
		}
	}
}

// TestEmittedObjectsMatchSchemas validates every object the boundary emits
// against the upstream schemas.
func TestEmittedObjectsMatchSchemas(t *testing.T) {
	b := fixtureBoundary(t, evidence.NewMemory())
	ctx := context.Background()
	for _, c := range []string{"conformance.echo", "conformance.fail", "conformance.unsafe", "conformance.approval", "nope"} {
		if _, err := b.Invoke(ctx, &chp.InvocationEnvelope{CapabilityID: c, Correlation: chp.CorrelationContext{CorrelationID: "schemas"}}); err != nil {
			t.Fatal(err)
		}
	}
	res, _ := b.Replay(ctx, chp.ReplayQuery{CorrelationID: "schemas"})
	if err := schema.Validate("replay-result", res); err != nil {
		t.Errorf("replay result: %v", err)
	}
	for _, e := range res.Events {
		if err := schema.Validate("evidence-event", e); err != nil {
			t.Errorf("event %s: %v", e, err)
		}
	}
	bundle, err := b.Export(ctx, "schemas")
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate("evidence-bundle", bundle); err != nil {
		t.Errorf("bundle: %v", err)
	}
	if err := schema.Validate("host-descriptor", b.Describe()); err != nil {
		t.Errorf("host descriptor: %v", err)
	}
	if err := schema.Validate("chp-identity", b.Identity()); err != nil {
		t.Errorf("identity: %v", err)
	}
}

// TestMalformedSubjectRejected: a subject that is not strict JSON (here a
// duplicate key, which would make its bound digest ambiguous) is a bad
// envelope — 400 / InvalidParams in the bindings (TestMalformedSubjectIs400
// in chphttp) — not an evidence failure, and records nothing.
func TestMalformedSubjectRejected(t *testing.T) {
	store := evidence.NewMemory()
	b := fixtureBoundary(t, store)
	for _, subj := range []string{`{"id":"a","id":"b"}`, `"x"`, `[1]`} {
		_, err := b.Invoke(context.Background(), &chp.InvocationEnvelope{CapabilityID: "conformance.echo", Subject: json.RawMessage(subj)})
		if !errors.Is(err, chp.ErrBadEnvelope) {
			t.Errorf("%s: err %v, want ErrBadEnvelope", subj, err)
		}
	}
	if store.LastSequence() != 0 {
		t.Errorf("a rejected envelope left %d events", store.LastSequence())
	}
}

// TestBudgetConcurrent: gate 8's count and the execution_started append are
// atomic per correlation, so concurrent calls cannot overrun the budget:
// of many calls started at once in one correlation, exactly action_limit
// execute.
func TestBudgetConcurrent(t *testing.T) {
	b, err := New(Config{HostID: "test-host", Store: yieldingCount{evidence.NewMemory()}})
	if err != nil {
		t.Fatal(err)
	}
	limit := int64(3)
	if err := b.Register(Capability{Descriptor: chp.CapabilityDescriptor{ID: "budget.echo", Version: "1.0.0", Description: "echo",
		Autonomy: &chp.AutonomyProfile{ActionLimit: &limit}},
		Handler: func(_ context.Context, p json.RawMessage) (json.RawMessage, error) { return p, nil }}); err != nil {
		t.Fatal(err)
	}
	const calls = 32
	start := make(chan struct{})
	outcomes := make(chan *chp.InvocationResult, calls)
	errs := make(chan error, calls)
	for range calls {
		go func() {
			<-start
			res, err := b.Invoke(context.Background(), &chp.InvocationEnvelope{CapabilityID: "budget.echo",
				Correlation: chp.CorrelationContext{CorrelationID: "budget-race"}})
			if err != nil {
				errs <- err
				return
			}
			outcomes <- res
		}()
	}
	close(start)
	ran, denied := 0, 0
	for range calls {
		select {
		case err := <-errs:
			t.Fatal(err)
		case res := <-outcomes:
			switch {
			case res.Outcome == chp.OutcomeSuccess:
				ran++
			case res.Denial != nil && res.Denial.Code == chp.CodeBudgetExceeded:
				denied++
			default:
				t.Fatalf("unexpected result %+v", res)
			}
		}
	}
	if ran != int(limit) || denied != calls-int(limit) {
		t.Fatalf("%d calls ran and %d were denied, want %d and %d", ran, denied, limit, calls-int(limit))
	}
}

// yieldingCount is a store that yields the processor after each Count, so
// that concurrent invocations interleave between counting the budget and
// appending execution_started.
type yieldingCount struct{ evidence.Store }

func (s yieldingCount) Count(ctx context.Context, corr, typ string) (int, error) {
	n, err := s.Store.Count(ctx, corr, typ)
	runtime.Gosched()
	return n, err
}

// TestRequestedCapabilityVersion: gate 2 honours requested_capability_version
// as read from the wire — the highest satisfying version runs; no satisfying
// version, or a range that does not parse, is a capability_version_unsupported
// denial carrying requested and available.
func TestRequestedCapabilityVersion(t *testing.T) {
	b, err := New(Config{HostID: "ver-host", Store: evidence.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1.0.0", "1.4.2", "1.10.0", "2.0.0-rc.1"} {
		v := v
		if err := b.Register(Capability{Descriptor: chp.CapabilityDescriptor{ID: "kv.get", Version: v, Description: "x"},
			Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.Marshal(v) }}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Register(Capability{Descriptor: chp.CapabilityDescriptor{ID: "kv.one", Version: "1.0.0", Description: "x"},
		Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ envelope, ran, denied string }{
		{envelope: `{"capability_id":"kv.get","requested_capability_version":"^1"}`, ran: "1.10.0"},
		{envelope: `{"capability_id":"kv.get","requested_capability_version":"~1.4"}`, ran: "1.4.2"},
		{envelope: `{"capability_id":"kv.get","requested_capability_version":">=1.0 <1.4"}`, ran: "1.0.0"},
		{envelope: `{"capability_id":"kv.get","requested_capability_version":"^1","version":"1.4.2"}`, ran: "1.4.2"},
		{envelope: `{"capability_id":"kv.get","requested_capability_version":"2.0.0-rc.1"}`, ran: "2.0.0-rc.1"},
		{envelope: `{"capability_id":"kv.get","requested_capability_version":"^2"}`, denied: chp.CodeCapabilityVersionUnsupported},
		{envelope: `{"capability_id":"kv.one","requested_capability_version":"^2"}`, denied: chp.CodeCapabilityVersionUnsupported},
		{envelope: `{"capability_id":"kv.one","requested_capability_version":"no such range!"}`, denied: chp.CodeCapabilityVersionUnsupported},
		{envelope: `{"capability_id":"kv.one","requested_capability_version":"1.0.0"}`, ran: ""},
		{envelope: `{"capability_id":"kv.nope","requested_capability_version":"^1"}`, denied: chp.CodeCapabilityNotFound},
		{envelope: `{"capability_id":"kv.get"}`, denied: chp.CodeCapabilityNotFound}, // several versions, none named
	} {
		env, err := chp.ParseEnvelope([]byte(c.envelope))
		if err != nil {
			t.Fatal(err)
		}
		res, err := b.Invoke(context.Background(), env)
		if err != nil {
			t.Fatal(err)
		}
		if c.denied != "" {
			if res.Outcome != chp.OutcomeDenied || res.Denial.Code != c.denied {
				t.Errorf("%s: outcome %s %+v, want denied %s", c.envelope, res.Outcome, res.Denial, c.denied)
				continue
			}
			if c.denied == chp.CodeCapabilityVersionUnsupported {
				var d struct {
					Requested string   `json:"requested"`
					Available []string `json:"available"`
				}
				if err := json.Unmarshal(res.Denial.Details, &d); err != nil || d.Requested == "" || len(d.Available) == 0 || res.Denial.Retryable {
					t.Errorf("%s: details %s (%v)", c.envelope, res.Denial.Details, err)
				}
			}
			continue
		}
		if res.Outcome != chp.OutcomeSuccess {
			t.Errorf("%s: %s %+v", c.envelope, res.Outcome, res.Denial)
			continue
		}
		if c.ran != "" && (string(res.Data) != `"`+c.ran+`"` || *res.CapabilityVersion != c.ran) {
			t.Errorf("%s: ran %s (version %s), want %s", c.envelope, res.Data, *res.CapabilityVersion, c.ran)
		}
	}
}
