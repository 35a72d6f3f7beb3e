package boundary

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/schema"
	"github.com/capmesh/capmesh/evidence"
)

// Capability schemas of the tests below: kv.put takes {"key": {"value":
// "<lowercase>"}, "ttl"?: 1..3600} and answers {"stored": true}.
const (
	putInput = `{"type":"object","required":["key"],"additionalProperties":false,"properties":{
		"key":{"type":"object","required":["value"],"properties":{"value":{"type":"string","pattern":"^[a-z]+$"}}},
		"ttl":{"type":"integer","minimum":1,"maximum":3600}}}`
	putOutput = `{"type":"object","required":["stored"],"properties":{"stored":{"type":"boolean"}}}`
)

// schemaBoundary registers kv.put, whose handler answers what the payload's
// "answer" member holds (the output-schema cases) or {"stored":true}.
func schemaBoundary(t *testing.T, strict bool) (*Boundary, *evidence.Memory) {
	t.Helper()
	store := evidence.NewMemory()
	b, err := New(Config{HostID: "schema-host", Store: store, StrictOutputSchema: strict})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Register(Capability{Descriptor: chp.CapabilityDescriptor{ID: "kv.put", Version: "1.0.0", Description: "put",
		InputSchema: json.RawMessage(putInput), OutputSchema: json.RawMessage(putOutput)},
		Handler: func(ctx context.Context, p json.RawMessage) (json.RawMessage, error) {
			env, _ := InvocationFromContext(ctx)
			if env.Correlation.CorrelationID == "bad-output" {
				return json.RawMessage(`{"stored":"secret-out","extra":1}`), nil
			}
			return json.RawMessage(`{"stored":true}`), nil
		}})
	if err != nil {
		t.Fatalf("a capability with input and output schemas must register: %v", err)
	}
	return b, store
}

// storedEvents returns the events of corr as stored.
func storedEvents(t *testing.T, b *Boundary, corr string) []chp.EvidenceEvent {
	t.Helper()
	yes := true
	res, err := b.Replay(context.Background(), chp.ReplayQuery{CorrelationID: corr, IncludePayloads: &yes})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]chp.EvidenceEvent, len(res.Events))
	for i, e := range res.Events {
		if err := json.Unmarshal(e, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// randomToken matches what a host generates at random or from the clock:
// hex digests, identifiers and timestamps. A payload value that leaked into
// evidence stands apart from them (delimited by JSON punctuation), so a
// search for it must not be fooled by a digit run inside a hash.
var randomToken = regexp.MustCompile(`[0-9a-fA-F-]{16,}|\d{4}-\d\d-\d\dT[0-9:.]+(Z|[+-]\d\d:\d\d)?`)

// withoutRandomTokens blanks every random or clock-derived token in s.
func withoutRandomTokens(s string) string { return randomToken.ReplaceAllString(s, "_") }

// TestWithoutRandomTokens: the blanking keeps a leaked value findable and
// hides it inside digests, ids and timestamps.
func TestWithoutRandomTokens(t *testing.T) {
	for in, leaks := range map[string]bool{
		`{"ttl":98765}`:              true,
		`{"value":"Secret-Token-1"}`: true,
		`{"event_id":"0a98765bc-1234-4def-8abc-0123456789ab"}`: false,
		`{"hash":"sha256:3f2a98765e0c1d2b3f2a98765e0c1d2b"}`:   false,
		`{"timestamp":"2026-11-25T17:48:09.987654Z"}`:          false,
	} {
		text := withoutRandomTokens(in)
		if got := strings.Contains(text, "98765") || strings.Contains(text, "Secret-Token-1"); got != leaks {
			t.Errorf("%s → %s: leak found %v, want %v", in, text, got, leaks)
		}
	}
}

// TestPayloadSchemas: a capability's input schema denies invalid payloads
// with a readable message naming the failing location, recorded as such in
// the evidence; its output schema flags (or, strict, denies) invalid
// results. No message quotes a payload value.
func TestPayloadSchemas(t *testing.T) {
	cases := []struct {
		name, payload string
		outcome       chp.Outcome
		code, message string
		path          string
	}{
		{"valid", `{"key":{"value":"abc"},"ttl":60}`, chp.OutcomeSuccess, "", "", ""},
		{"missing nested", `{"key":{}}`, chp.OutcomeDenied, chp.CodeInputSchemaValidationFailed,
			"payload fails the input schema at /key: missing property 'value'", "/key"},
		{"missing root", `{}`, chp.OutcomeDenied, chp.CodeInputSchemaValidationFailed,
			"payload fails the input schema at /: missing property 'key'", "/"},
		{"type", `{"key":{"value":7}}`, chp.OutcomeDenied, chp.CodeInputSchemaValidationFailed,
			"payload fails the input schema at /key/value: got number, want string", "/key/value"},
		{"pattern, value not quoted", `{"key":{"value":"Secret-Token-1"}}`, chp.OutcomeDenied, chp.CodeInputSchemaValidationFailed,
			`payload fails the input schema at /key/value: string does not match pattern "^[a-z]+$"`, "/key/value"},
		{"range, value not quoted", `{"key":{"value":"a"},"ttl":98765}`, chp.OutcomeDenied, chp.CodeInputSchemaValidationFailed,
			"payload fails the input schema at /ttl: value must be <= 3600", "/ttl"},
		{"several, in location order", `{"zz":1,"aa":2,"key":{"value":1},"ttl":"x"}`, chp.OutcomeDenied, chp.CodeInputSchemaValidationFailed,
			"payload fails the input schema at /: additional properties 'aa', 'zz' not allowed; at /key/value: got number, want string; at /ttl: got string, want integer", "/"},
		{"not an object", `[1]`, chp.OutcomeDenied, chp.CodeInputSchemaValidationFailed,
			"payload fails the input schema at /: got array, want object", "/"},
	}
	b, _ := schemaBoundary(t, false)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			corr := "schema-" + strings.ReplaceAll(c.name, " ", "-")
			// The validator walks objects in map order: the message must
			// not depend on it.
			for range 8 {
				res, err := b.Invoke(context.Background(), &chp.InvocationEnvelope{CapabilityID: "kv.put",
					Payload: json.RawMessage(c.payload), Correlation: chp.CorrelationContext{CorrelationID: corr}})
				if err != nil {
					t.Fatal(err)
				}
				if res.Outcome != c.outcome {
					t.Fatalf("outcome %s, want %s (%+v)", res.Outcome, c.outcome, res.Denial)
				}
				if c.code == "" {
					return
				}
				if res.Denial == nil || res.Denial.Code != c.code || res.Denial.Retryable {
					t.Fatalf("denial %+v, want %s", res.Denial, c.code)
				}
				if res.Denial.Message != c.message {
					t.Fatalf("message\n got %s\nwant %s", res.Denial.Message, c.message)
				}
				var details struct {
					SchemaID string `json:"schema_id"`
					Path     string `json:"path"`
				}
				if err := json.Unmarshal(res.Denial.Details, &details); err != nil || details.Path != c.path || details.SchemaID != "kv.put:1.0.0#input_schema" {
					t.Fatalf("details %s, want path %s", res.Denial.Details, c.path)
				}
			}
			// The evidence records the same denial, and no payload value.
			evs := storedEvents(t, b, corr)
			if len(evs) != 8 {
				t.Fatalf("%d events, want one execution_denied per call", len(evs))
			}
			for _, ev := range evs {
				if ev.EventType != chp.EventDenied || ev.Denial == nil || ev.Denial.Message != c.message {
					t.Fatalf("recorded %s with denial %+v", ev.EventType, ev.Denial)
				}
			}
			raw, _ := json.Marshal(evs)
			text := withoutRandomTokens(string(raw))
			for _, secret := range []string{"Secret-Token-1", "98765"} {
				if strings.Contains(text, secret) {
					t.Errorf("evidence holds the payload value %q", secret)
				}
			}
			if v, err := b.Verify(context.Background(), corr); err != nil || !v.Valid {
				t.Errorf("chain: %+v %v", v, err)
			}
		})
	}
}

// TestOutputSchema: a result that violates output_schema is recorded as a
// warning on execution_completed by default, and denied
// (output_schema_validation_failed, after execution_started) when strict.
func TestOutputSchema(t *testing.T) {
	const wantErr = "at /stored: got string, want boolean"
	for _, strict := range []bool{false, true} {
		b, _ := schemaBoundary(t, strict)
		ctx := context.Background()
		ok, err := b.Invoke(ctx, &chp.InvocationEnvelope{CapabilityID: "kv.put", Payload: json.RawMessage(`{"key":{"value":"a"}}`)})
		if err != nil || ok.Outcome != chp.OutcomeSuccess || string(ok.Data) != `{"stored":true}` {
			t.Fatalf("strict=%v: valid output: %+v %v", strict, ok, err)
		}
		res, err := b.Invoke(ctx, &chp.InvocationEnvelope{CapabilityID: "kv.put", Payload: json.RawMessage(`{"key":{"value":"a"}}`),
			Correlation: chp.CorrelationContext{CorrelationID: "bad-output"}})
		if err != nil {
			t.Fatal(err)
		}
		evs := storedEvents(t, b, "bad-output")
		var types []string
		for _, ev := range evs {
			types = append(types, ev.EventType)
		}
		if !strict {
			if res.Outcome != chp.OutcomeSuccess {
				t.Fatalf("lenient: outcome %s", res.Outcome)
			}
			if diff := cmp.Diff([]string{chp.EventStarted, chp.EventCompleted}, types); diff != "" {
				t.Fatalf("lenient events (-want +got):\n%s", diff)
			}
			var p map[string]any
			_ = json.Unmarshal(evs[1].Payload, &p)
			if p["output_schema_valid"] != false || p["output_schema_error"] != wantErr {
				t.Errorf("lenient: completed payload %s", evs[1].Payload)
			}
			continue
		}
		if res.Outcome != chp.OutcomeDenied || res.Denial == nil || res.Denial.Code != chp.CodeOutputSchemaValidationFailed {
			t.Fatalf("strict: %+v", res)
		}
		if want := "result fails the output schema " + wantErr; res.Denial.Message != want {
			t.Errorf("strict: message %q, want %q", res.Denial.Message, want)
		}
		if res.Data != nil {
			t.Errorf("strict: a denied result carries data %s", res.Data)
		}
		if diff := cmp.Diff([]string{chp.EventStarted, chp.EventDenied}, types); diff != "" {
			t.Fatalf("strict events (-want +got):\n%s", diff)
		}
		if evs[1].Denial == nil || evs[1].Denial.Message != res.Denial.Message {
			t.Errorf("strict: recorded denial %+v", evs[1].Denial)
		}
		if raw, _ := json.Marshal(evs); strings.Contains(string(raw), "secret-out") {
			t.Error("evidence holds a value of the handler's result")
		}
	}
}

// TestSchemaRegistration: schemas compile under a fragment-free URL of their
// own, whatever they declare ($id, $anchor, $defs, an older draft) and
// whatever characters the capability id holds; a $ref outside the schema
// fails registration unless it names a CHP protocol schema.
func TestSchemaRegistration(t *testing.T) {
	b, err := New(Config{HostID: "reg-host"})
	if err != nil {
		t.Fatal(err)
	}
	echo := func(_ context.Context, p json.RawMessage) (json.RawMessage, error) { return p, nil }
	cases := []struct {
		id, schema string
		valid      string // a payload the schema admits ("" = registration fails)
		invalid    string
		err        string
	}{
		{"plain", `{"type":"object","required":["value"]}`, `{"value":1}`, `{}`, ""},
		{"defs", `{"$defs":{"v":{"type":"string"}},"properties":{"value":{"$ref":"#/$defs/v"}}}`, `{"value":"x"}`, `{"value":1}`, ""},
		{"own-id", `{"$id":"https://example.com/s.json","$defs":{"v":{"type":"string"}},"properties":{"value":{"$ref":"#/$defs/v"}}}`, `{"value":"x"}`, `{"value":1}`, ""},
		{"draft7", `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"v":{"type":"string"}},"properties":{"value":{"$ref":"#/definitions/v"}}}`, `{"value":"x"}`, `{"value":1}`, ""},
		{"anchor", `{"$anchor":"input","type":"object"}`, `{}`, `[]`, ""},
		{"inner-anchor", `{"properties":{"value":{"$ref":"#v"}},"$defs":{"x":{"$anchor":"v","type":"string"}}}`, `{"value":"x"}`, `{"value":1}`, ""},
		{"odd id #1 %2F /x ü", `{"type":"object","required":["value"]}`, `{"value":1}`, `{}`, ""},
		{"chp-ref", `{"type":"object","properties":{"corr":{"$ref":"https://chp.dev/schemas/v0.1/correlation-context.schema.json"}}}`,
			`{"corr":{"correlation_id":"c"}}`, `{"corr":{"correlation_id":5}}`, ""},
		{"file-ref", `{"$ref":"file:///etc/passwd"}`, "", "", "self-contained"},
		{"http-ref", `{"properties":{"v":{"$ref":"https://example.com/other.json"}}}`, "", "", "self-contained"},
		{"not-schema", `{"type":"no-such-type"}`, "", "", "input_schema"},
	}
	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			err := b.Register(Capability{Descriptor: chp.CapabilityDescriptor{ID: c.id, Version: "1.0.0", Description: "x",
				InputSchema: json.RawMessage(c.schema)}, Handler: echo})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Register: %v, want an error about %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Register: %v", err)
			}
			for payload, want := range map[string]chp.Outcome{c.valid: chp.OutcomeSuccess, c.invalid: chp.OutcomeDenied} {
				res, err := b.Invoke(context.Background(), &chp.InvocationEnvelope{CapabilityID: c.id, Payload: json.RawMessage(payload)})
				if err != nil {
					t.Fatal(err)
				}
				if res.Outcome != want {
					t.Errorf("payload %s: %s (%+v), want %s", payload, res.Outcome, res.Denial, want)
				}
			}
		})
	}
	// Two versions of one id compile side by side under their own URLs.
	for _, v := range []string{"1.0.0", "2.0.0"} {
		if err := b.Register(Capability{Descriptor: chp.CapabilityDescriptor{ID: "versioned", Version: v, Description: "x",
			InputSchema: json.RawMessage(`{"required":["v` + v[:1] + `"]}`), OutputSchema: json.RawMessage(`{"type":"object"}`)},
			Handler: echo}); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{"1.0.0", "2.0.0"} {
		ver := v
		res, err := b.Invoke(context.Background(), &chp.InvocationEnvelope{CapabilityID: "versioned", Version: &ver,
			Payload: json.RawMessage(`{"v` + v[:1] + `":0}`)})
		if err != nil || res.Outcome != chp.OutcomeSuccess {
			t.Errorf("version %s: %+v %v", v, res, err)
		}
	}
	if a, b := schema.PayloadURL("a/b", "1", "input"), schema.PayloadURL("a", "b/1", "input"); a == b || strings.Contains(a, "#") {
		t.Errorf("schema URLs %q and %q collide or carry a fragment", a, b)
	}
}
