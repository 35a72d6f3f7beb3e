package chp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/evidence"
	"github.com/google/go-cmp/cmp"
)

func fixtureBoundary(t *testing.T, store evidence.Store) *Boundary {
	t.Helper()
	b, err := NewBoundary(Config{HostID: "test-host", Store: store, Policy: FixturePolicy(), Safety: FixtureSafety()})
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
	res, err := b.Replay(context.Background(), ReplayQuery{CorrelationID: corr})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range res.Events {
		var ev EvidenceEvent
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
	safety := []string{EventSafetyStarted, EventSafetyCompleted, EventSafetyApproved}
	cases := []struct {
		name    string
		capID   string
		payload string
		mode    string
		outcome Outcome
		code    string
		retry   bool
		events  []string
	}{
		{"echo", "conformance.echo", `{"value":"x"}`, "", OutcomeSuccess, "", false, append(safety, EventStarted, EventCompleted)},
		{"fail", "conformance.fail", `{}`, "", OutcomeFailure, "", false, append(safety, EventStarted, EventFailed)},
		{"guarded", "conformance.guarded", `{}`, "", OutcomeDenied, CodeInvariantFailed, false, []string{EventDenied}},
		{"unknown", "no.such.cap", `{}`, "", OutcomeDenied, CodeCapabilityNotFound, false, []string{EventDenied}},
		{"empty id", "  ", `{}`, "", OutcomeDenied, CodeCapabilityNotFound, false, []string{EventDenied}},
		{"mode", "conformance.echo", `{}`, "async", OutcomeDenied, CodeUnsupportedMode, false, []string{EventDenied}},
		{"approval", "conformance.approval", `{}`, "", OutcomeDenied, CodeApprovalRequired, true, []string{EventApprovalRequested, EventDenied}},
		{"risky", "conformance.risky", `{}`, "", OutcomeDenied, CodePolicyBlocked, false, []string{EventDenied}},
		{"unsafe", "conformance.unsafe", `{}`, "", OutcomeDenied, CodeSafetyBlocked, false,
			[]string{EventSafetyStarted, EventSafetyCompleted, EventSafetyTriggered, EventSafetyBlocked, EventDenied}},
	}
	b := fixtureBoundary(t, evidence.NewMemory())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			corr := "corr-" + strings.ReplaceAll(c.name, " ", "-")
			env := &InvocationEnvelope{CapabilityID: c.capID, Payload: json.RawMessage(c.payload), Mode: c.mode,
				Correlation: CorrelationContext{CorrelationID: corr}}
			res, err := b.Invoke(context.Background(), env)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != c.outcome || res.Success != (c.outcome == OutcomeSuccess) {
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
			if err := ValidateObject("invocation-result", res); err != nil {
				t.Errorf("emitted result violates its schema: %v", err)
			}
		})
	}
}

func TestBudgetAndSkipAndReplay(t *testing.T) {
	b := fixtureBoundary(t, evidence.NewMemory())
	ctx := context.Background()
	inv := func(capID, corr, id string) *InvocationResult {
		t.Helper()
		res, err := b.Invoke(ctx, &InvocationEnvelope{CapabilityID: capID, InvocationID: id, Correlation: CorrelationContext{CorrelationID: corr}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if r := inv("conformance.budgeted", "budget", ""); r.Outcome != OutcomeSuccess {
		t.Fatalf("first budgeted call: %s", r.Outcome)
	}
	r := inv("conformance.budgeted", "budget", "")
	if r.Outcome != OutcomeDenied || r.Denial.Code != CodeBudgetExceeded || !r.Denial.Retryable {
		t.Fatalf("second budgeted call: %+v", r.Denial)
	}
	// A denial or skip does not consume budget: only execution_started counts.
	got := eventTypes(t, b, "budget")
	want := []string{EventSafetyStarted, EventSafetyCompleted, EventSafetyApproved, EventStarted, EventCompleted, EventBudgetExceeded, EventDenied}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("budget events (-want +got):\n%s", diff)
	}
	// Gate 3: disabled is a skip with capability_disabled in the denial slot.
	if err := b.SetEnabled("conformance.echo", "1.0.0", false); err != nil {
		t.Fatal(err)
	}
	r = inv("conformance.echo", "skip", "")
	if r.Outcome != OutcomeSkipped || r.Success || r.Denial == nil || r.Denial.Code != CodeCapabilityDisabled {
		t.Fatalf("disabled: %+v", r)
	}
	if diff := cmp.Diff([]string{EventSkipped}, eventTypes(t, b, "skip")); diff != "" {
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
		env, err := ParseEnvelope([]byte(body))
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
		if _, err := ParseEnvelope([]byte(bad)); !errors.Is(err, ErrBadEnvelope) {
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
		if _, err := b.Invoke(ctx, &InvocationEnvelope{CapabilityID: c, Correlation: CorrelationContext{CorrelationID: "schemas"}}); err != nil {
			t.Fatal(err)
		}
	}
	res, _ := b.Replay(ctx, ReplayQuery{CorrelationID: "schemas"})
	if err := ValidateObject("replay-result", res); err != nil {
		t.Errorf("replay result: %v", err)
	}
	for _, e := range res.Events {
		if err := ValidateObject("evidence-event", e); err != nil {
			t.Errorf("event %s: %v", e, err)
		}
	}
	bundle, err := b.Export(ctx, "schemas")
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateObject("evidence-bundle", bundle); err != nil {
		t.Errorf("bundle: %v", err)
	}
	if err := ValidateObject("host-descriptor", b.Describe()); err != nil {
		t.Errorf("host descriptor: %v", err)
	}
	if err := ValidateObject("chp-identity", b.Identity()); err != nil {
		t.Errorf("identity: %v", err)
	}
}

// TestMalformedSubjectRejected: a subject that is not strict JSON (here a
// duplicate key, which would make its bound digest ambiguous) is a bad
// envelope — 400 / InvalidParams — not an evidence failure, and records
// nothing.
func TestMalformedSubjectRejected(t *testing.T) {
	store := evidence.NewMemory()
	b := fixtureBoundary(t, store)
	for _, subj := range []string{`{"id":"a","id":"b"}`, `"x"`, `[1]`} {
		_, err := b.Invoke(context.Background(), &InvocationEnvelope{CapabilityID: "conformance.echo", Subject: json.RawMessage(subj)})
		if !errors.Is(err, ErrBadEnvelope) {
			t.Errorf("%s: err %v, want ErrBadEnvelope", subj, err)
		}
	}
	if store.LastSequence() != 0 {
		t.Errorf("a rejected envelope left %d events", store.LastSequence())
	}
	rec := httptest.NewRecorder()
	b.HTTPHandler(nil).ServeHTTP(rec, httptest.NewRequest("POST", "/invoke",
		strings.NewReader(`{"capability_id":"conformance.echo","subject":{"id":"a","id":"b"}}`)))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("HTTP status %d, want 400: %s", rec.Code, rec.Body)
	}
}
