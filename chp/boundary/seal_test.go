package boundary

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary/governance"
	"github.com/capmesh/capmesh/chp/boundary/internal/evjson"
	"github.com/capmesh/capmesh/evidence"
)

// checkSealed checks every stored event of corr against the generic path:
// the bytes parse strictly, carry exactly the members encoding/json would
// write for the same EvidenceEvent, and their content hash, payload
// commitment and attribution binding recompute with package canonical.
func checkSealed(t *testing.T, store evidence.Store, corr string) int {
	t.Helper()
	recs, err := store.Replay(context.Background(), evidence.Query{CorrelationID: corr})
	if err != nil {
		t.Fatal(err)
	}
	prev := ""
	for _, r := range recs {
		if _, err := canonical.Parse(r.Data); err != nil {
			t.Fatalf("seq %d: stored event does not parse strictly: %v\n%s", r.Sequence, err, r.Data)
		}
		var ev chp.EvidenceEvent
		dec := json.NewDecoder(strings.NewReader(string(r.Data)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("seq %d: %v", r.Sequence, err)
		}
		// Same members and values as the struct encoding.
		ref, _ := json.Marshal(&ev)
		var got, want any
		_ = json.Unmarshal(r.Data, &got)
		_ = json.Unmarshal(ref, &want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("seq %d: stored event differs from its struct encoding (-want +got):\n%s", r.Sequence, diff)
		}
		if !strings.HasPrefix(string(r.Data), `{"assurance":`) || !strings.HasSuffix(string(r.Data), `"}`) {
			t.Errorf("seq %d: not a sorted compact object: %s", r.Sequence, r.Data)
		}
		// Hashes, recomputed generically.
		h, err := chp.EventContentHash(r.Data, prev)
		if err != nil || h != r.ContentHash || ev.ContentHash == nil || *ev.ContentHash != h {
			t.Errorf("seq %d: content hash %s (%v), store %s", r.Sequence, h, err, r.ContentHash)
		}
		canon, err := canonical.Canonicalize(canonical.ChpStableV1, ev.Payload)
		if err != nil {
			t.Fatalf("seq %d: payload is not chp-stable-v1 content: %v", r.Sequence, err)
		}
		if sum := sha256.Sum256(canon); hex.EncodeToString(sum[:]) != ev.PayloadCommitment {
			t.Errorf("seq %d: payload_commitment %s, canonical %s", r.Sequence, ev.PayloadCommitment, canon)
		}
		if a, err := chp.CheckAttribution(r.Data); err != nil || a.Attribution != chp.AttributionBound {
			t.Errorf("seq %d: attribution %+v %v", r.Sequence, a, err)
		}
		if ev.Sequence != r.Sequence || (prev == "") != (ev.PrevHash == nil) || (ev.PrevHash != nil && *ev.PrevHash != prev) {
			t.Errorf("seq %d: sequence/prev_hash members disagree with the store", r.Sequence)
		}
		prev = r.ContentHash
	}
	return len(recs)
}

// TestSealerMatchesGenericEncoding drives events with awkward strings,
// nested payloads, denials and errors through the hand-written sealer and
// checks each against the generic encoders.
func TestSealerMatchesGenericEncoding(t *testing.T) {
	store := evidence.NewMemory()
	b, err := New(Config{HostID: "hôst \"q\" \\ <&> \u2028 😀", Store: store, Environment: "prod\n",
		Policy: &governance.PolicyConfig{BlockPatterns: []string{"forbidden"}}, Safety: FixtureSafety(),
		Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 6789000, time.FixedZone("x", 3600)) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := RegisterFixtures(b); err != nil {
		t.Fatal(err)
	}
	two := int64(2)
	if err := b.Register(Capability{Descriptor: chp.CapabilityDescriptor{ID: "ünï.cödé", Version: "1.0.0-β", Description: "x",
		Autonomy: &chp.AutonomyProfile{ActionLimit: &two, SpendLimit: ptr(1.5), SpendUnits: 1}},
		Handler: func(_ context.Context, p json.RawMessage) (json.RawMessage, error) { return p, nil }}); err != nil {
		t.Fatal(err)
	}
	cause, trace := "cause \u00e9 \"x\"", "trace\t1"
	ctx := context.Background()
	envs := []*chp.InvocationEnvelope{
		{CapabilityID: "conformance.echo", Payload: json.RawMessage(`{"value":"x"}`)},
		{CapabilityID: "conformance.fail"},
		{CapabilityID: "conformance.unsafe"},
		{CapabilityID: "conformance.guarded"},
		{CapabilityID: "conformance.approval"},
		{CapabilityID: "conformance.echo", Payload: json.RawMessage(`{"value":"forbidden"}`)},
		{CapabilityID: "nö.such\u0001cap"},
		{CapabilityID: ""},
		{CapabilityID: "ünï.cödé", Subject: json.RawMessage(` { "id" : "agent \ud83d\ude00 \ud800", "score": 1.5, "n": [1, {"b": null, "a": true}] } `)},
		{CapabilityID: "ünï.cödé"},
		{CapabilityID: "ünï.cödé"},
	}
	for i, env := range envs {
		env.Correlation = chp.CorrelationContext{CorrelationID: "corr ü \"1\"", CausationID: &cause, TraceID: &trace,
			Baggage: json.RawMessage(`{ "k" : [1, 2.50, "ü"] }`)}
		if i%2 == 1 {
			env.InvocationID = "inv \\ " + string(rune('a'+i))
		}
		if _, err := b.Invoke(ctx, env); err != nil {
			t.Fatalf("%s: %v", env.CapabilityID, err)
		}
	}
	n := checkSealed(t, store, "corr ü \"1\"")
	if n < 20 {
		t.Fatalf("only %d events sealed", n)
	}
	v, err := b.Verify(ctx, "corr ü \"1\"")
	if err != nil || !v.Valid || v.VerifiedCount != n {
		t.Fatalf("verify: %+v %v", v, err)
	}
	bundle, err := b.Export(ctx, "corr ü \"1\"")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(bundle)
	if bv, _ := chp.VerifyBundle(raw, nil); !bv.Valid || bv.Bound != n {
		t.Fatalf("bundle: %+v", bv)
	}
}

func ptr[T any](v T) *T { return &v }

// FuzzSeal: whatever strings a caller or host configuration puts into an
// event, the stored bytes parse strictly and the chain verifies.
func FuzzSeal(f *testing.F) {
	f.Add("host", "conformance.echo", "corr", "inv", `{"id":"u"}`, `{"value":1}`)
	f.Add("h\u2028", "ü\x00", "c\"\\", "", `{"id":"\ud800"}`, `{"a":[1,{"b":null}]}`)
	f.Add("h", "", "", "i\xff", `{}`, `{}`)
	f.Fuzz(func(t *testing.T, host, capID, corr, invID, subject, payload string) {
		store := evidence.NewMemory()
		b, err := New(Config{HostID: host, Store: store})
		if err != nil {
			return
		}
		if err := RegisterFixtures(b); err != nil {
			t.Fatal(err)
		}
		env, err := chp.ParseEnvelope([]byte(`{"capability_id":` + mustJSON(capID) + `,"invocation_id":` + mustJSON(invID) +
			`,"correlation_id":` + mustJSON(corr) + `,"subject":` + subject + `,"payload":` + payload + `}`))
		if err != nil {
			return
		}
		res, err := b.Invoke(context.Background(), env)
		if errors.Is(err, chp.ErrBadEnvelope) {
			// What ParseEnvelope lets through but cannot be evidenced (a
			// subject or baggage the strict reader refuses: invalid UTF-8,
			// a duplicate key; an overlong correlation id) is refused
			// before anything is written.
			if seq := store.LastSequence(); seq != 0 {
				t.Fatalf("a refused envelope (%v) left %d events", err, seq)
			}
			return
		}
		if err != nil {
			t.Fatalf("invoke: %v", err)
		}
		if n := checkSealed(t, store, res.Correlation.CorrelationID); n == 0 {
			t.Fatal("no evidence")
		}
		if v, err := b.Verify(context.Background(), res.Correlation.CorrelationID); err != nil || !v.Valid {
			t.Fatalf("verify: %+v %v", v, err)
		}
	})
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestAppendResult: the recorded form of a result decodes to the same JSON
// value encoding/json writes for it.
func TestAppendResult(t *testing.T) {
	b := fixtureBoundary(t, evidence.NewMemory())
	v := "1.0.0"
	started := "2026-01-01T00:00:00.000000Z"
	cause := "c\u00e9 <&>"
	for _, res := range []*chp.InvocationResult{
		{CapabilityID: "kv.get", CapabilityVersion: &v, CompletedAt: started, Data: json.RawMessage(" {\"a\" : [1, 2.5, \"\u2028\"]}\n"),
			EvidenceIDs: []string{"evt_1", "evt_2"}, InvocationID: "inv <1>", Outcome: chp.OutcomeSuccess, StartedAt: &started, Success: true},
		{CapabilityID: "<missing>", CompletedAt: started, EvidenceIDs: []string{}, InvocationID: "i", Outcome: chp.OutcomeDenied,
			Denial: b.denial(chp.CodeCapabilityNotFound, "no \"such\" cap", map[string]any{"hint": "x", "n": 3}), Replayed: true},
		{CapabilityID: "x", CompletedAt: started, InvocationID: "i", Outcome: chp.OutcomeFailure, Error: &chp.ErrorInfo{Message: "boom\x01\xff", Type: "error"}},
	} {
		env := &chp.InvocationEnvelope{CapabilityID: res.CapabilityID, InvocationID: res.InvocationID,
			Correlation: chp.CorrelationContext{CorrelationID: "corr \u00fc", CausationID: &cause, Baggage: json.RawMessage(`{"k": [1, "v"]}`), Environment: "e"}}
		chp.Normalize(env, time.Now())
		h, err := b.header(&invocation{}, env, nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Correlation = env.Correlation
		got, err := evjson.AppendResult(nil, res, h.corr)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(res)
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		_ = json.Unmarshal(want, &w)
		if diff := cmp.Diff(w, g); diff != "" {
			t.Errorf("recorded result differs from encoding/json (-want +got):\n%s", diff)
		}
		// Read back as the replay cache does, it is the same result.
		var back chp.InvocationResult
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(&back)
		var ga any
		_ = json.Unmarshal(a, &ga)
		if diff := cmp.Diff(w, ga); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
}
