package boundary

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary/mandates"
	"github.com/capmesh/capmesh/chp/schema"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/internal/specdata"
)

// mandateClock is the host time of the gate 5 tests.
var mandateClock = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func seedKey(seed byte) ed25519.PrivateKey {
	s := make([]byte, ed25519.SeedSize)
	s[0] = seed
	return ed25519.NewKeyFromSeed(s)
}

func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// mandateBoundary is the fixture host at mandateClock, signed, with
// revocations kept in file ("" = memory).
func mandateBoundary(t *testing.T, store evidence.Store, file string) *Boundary {
	t.Helper()
	b, err := New(Config{HostID: "test-host", Store: store, Policy: FixturePolicy(), Safety: FixtureSafety(),
		Key: seedKey(99), Now: func() time.Time { return mandateClock }, RevocationsFile: file})
	if err != nil {
		t.Fatal(err)
	}
	if err := RegisterFixtures(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// echoGrant is a one-hour grant from "principal" to "delegate" of
// conformance.echo.
func echoGrant() chp.MandateGrant {
	return chp.MandateGrant{PrincipalID: "principal", DelegateID: "delegate", Scope: []string{"conformance.echo"},
		ValidFrom: rfc(mandateClock.Add(-time.Minute)), ValidUntil: rfc(mandateClock.Add(time.Hour)),
		CreatedAt: rfc(mandateClock.Add(-time.Minute))}
}

func signMandate(t *testing.T, g chp.MandateGrant, key ed25519.PrivateKey, parent json.RawMessage) json.RawMessage {
	t.Helper()
	raw, err := chp.SignMandate(g, key, parent)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// invokeMandated invokes capID under mandate (as caller, nil: none) and
// returns the result.
func invokeMandated(t *testing.T, b *Boundary, capID string, mandate json.RawMessage, caller *Caller, invID string) *chp.InvocationResult {
	t.Helper()
	env := &chp.InvocationEnvelope{CapabilityID: capID, Payload: json.RawMessage(`{"value":"x"}`), Mandate: mandate,
		InvocationID: invID}
	ctx := context.Background()
	if caller != nil {
		ctx = WithCaller(ctx, caller)
	}
	res, err := b.Invoke(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// denial returns res's denial code and details.
func denialOf(t *testing.T, res *chp.InvocationResult) (string, map[string]any) {
	t.Helper()
	if res.Denial == nil {
		return "", nil
	}
	var d map[string]any
	_ = json.Unmarshal(res.Denial.Details, &d)
	return res.Denial.Code, d
}

func edited(t *testing.T, raw []byte, f func(m map[string]any)) json.RawMessage {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	out, _ := json.Marshal(m)
	return out
}

// TestMandateGateBindsSubject: a valid, in-scope mandate succeeds, every
// event's subject is the delegate under the principal, the stored events
// match the generic encoding, and the exported signed bundle verifies.
func TestMandateGateBindsSubject(t *testing.T) {
	store := evidence.NewMemory()
	b := mandateBoundary(t, store, "")
	res := invokeMandated(t, b, "conformance.echo", signMandate(t, echoGrant(), seedKey(1), nil), nil, "")
	if res.Outcome != chp.OutcomeSuccess {
		t.Fatalf("mandated invoke: %+v %+v", res.Outcome, res.Denial)
	}
	corr := res.Correlation.CorrelationID
	recs, err := store.Replay(context.Background(), evidence.Query{CorrelationID: corr})
	if err != nil || len(recs) == 0 {
		t.Fatal(err, len(recs))
	}
	for _, r := range recs {
		var ev struct{ Subject map[string]any }
		_ = json.Unmarshal(r.Data, &ev)
		s := ev.Subject
		if s["id"] != "delegate" || s["type"] != "mandate" || s["verified"] != true || s["principal"] != "principal" ||
			s["root_principal"] != "principal" || !strings.HasPrefix(s["mandate_id"].(string), "mnd_") {
			t.Fatalf("event subject %v", s)
		}
	}
	checkSealed(t, store, corr)
	bundle, err := b.Export(context.Background(), corr)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(bundle)
	v, err := chp.VerifyBundle(raw, &chp.VerifyOptions{RequireSigned: true})
	if err != nil || !v.Valid {
		t.Fatalf("bundle of a mandated invocation: %v %+v", err, v)
	}
}

// TestMandateGateRefusals: each refusal at gate 5, with its code.
func TestMandateGateRefusals(t *testing.T) {
	b := mandateBoundary(t, evidence.NewMemory(), "")
	good := signMandate(t, echoGrant(), seedKey(1), nil)
	expired, early := echoGrant(), echoGrant()
	expired.ValidUntil = rfc(mandateClock.Add(-time.Second))
	early.ValidFrom = rfc(mandateClock.Add(time.Minute))
	cases := []struct {
		name   string
		capID  string
		raw    json.RawMessage
		caller *Caller
		code   string
		check  string // the failed check named in details.checks
	}{
		{"tampered scope", "conformance.echo", edited(t, good, func(m map[string]any) { m["scope"] = []string{"*"} }), nil,
			chp.CodeMandateInvalid, "signature"},
		{"wrong delegate", "conformance.echo", good, NewCaller("mallory", "api_key", nil), chp.CodeMandateInvalid, "delegate"},
		{"expired", "conformance.echo", signMandate(t, expired, seedKey(1), nil), nil, chp.CodeMandateInvalid, "temporal"},
		{"not yet valid", "conformance.echo", signMandate(t, early, seedKey(1), nil), nil, chp.CodeMandateInvalid, "temporal"},
		{"malformed", "conformance.echo", json.RawMessage(`{"kind":"mandate"}`), nil, chp.CodeMandateInvalid, "structure"},
		{"out of scope", "conformance.fail", good, nil, chp.CodePolicyBlocked, ""},
	}
	for _, c := range cases {
		res := invokeMandated(t, b, c.capID, c.raw, c.caller, "")
		code, details := denialOf(t, res)
		if res.Outcome != chp.OutcomeDenied || code != c.code || res.Denial.Retryable {
			t.Errorf("%s: %s %s", c.name, res.Outcome, code)
			continue
		}
		if c.check != "" {
			if checks, _ := details["checks"].(map[string]any); checks[c.check] != false {
				t.Errorf("%s: details %v, want checks.%s false", c.name, details, c.check)
			}
		}
	}
	// The delegate the transport verified is accepted.
	if res := invokeMandated(t, b, "conformance.echo", good, NewCaller("delegate", "api_key", nil), ""); res.Outcome != chp.OutcomeSuccess {
		t.Errorf("named delegate refused: %+v", res.Denial)
	}
}

// TestMandateExhausted: max_invocations=2 allows two distinct invocations,
// a replayed id does not count again, and the third is mandate_exhausted
// with details.used.
func TestMandateExhausted(t *testing.T) {
	b := mandateBoundary(t, evidence.NewMemory(), "")
	g := echoGrant()
	g.MaxInvocations = 2
	capped := signMandate(t, g, seedKey(1), nil)
	for i, id := range []string{"inv_a", "inv_a", "inv_b"} {
		if res := invokeMandated(t, b, "conformance.echo", capped, nil, id); res.Outcome != chp.OutcomeSuccess {
			t.Fatalf("use %d (%s): %+v", i, id, res.Denial)
		}
	}
	res := invokeMandated(t, b, "conformance.echo", capped, nil, "inv_c")
	code, details := denialOf(t, res)
	if code != chp.CodeMandateExhausted || res.Denial.Retryable || details["used"] != 2.0 || details["max_invocations"] != 2.0 {
		t.Fatalf("third use: %s %v", code, details)
	}
	// Another principal's mandate of the same id has its own count.
	g.MandateID = mandateIDOf(t, capped)
	if res := invokeMandated(t, b, "conformance.echo", signMandate(t, g, seedKey(2), nil), nil, "inv_d"); res.Outcome != chp.OutcomeSuccess {
		t.Fatalf("same id, other key: %+v", res.Denial)
	}
}

// TestMandateExhaustedConcurrent: concurrent distinct invocations of a
// capped mandate succeed exactly max_invocations times.
func TestMandateExhaustedConcurrent(t *testing.T) {
	b := mandateBoundary(t, evidence.NewMemory(), "")
	g := echoGrant()
	g.MaxInvocations = 3
	capped := signMandate(t, g, seedKey(1), nil)
	var wg sync.WaitGroup
	outcomes := make([]chp.Outcome, 10)
	for i := range outcomes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := b.Invoke(context.Background(), &chp.InvocationEnvelope{CapabilityID: "conformance.echo",
				Payload: json.RawMessage(`{}`), Mandate: capped})
			if err == nil {
				outcomes[i] = res.Outcome
			}
		}()
	}
	wg.Wait()
	n := 0
	for _, o := range outcomes {
		if o == chp.OutcomeSuccess {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("%d successes of a 3-use mandate: %v", n, outcomes)
	}
}

func mandateIDOf(t *testing.T, raw []byte) string {
	m, err := chp.ParseMandate(raw)
	if err != nil {
		t.Fatal(err)
	}
	return m.MandateID
}

// subChain is a root grant from "root" to "middle" (two hours) and a
// narrowed sub-mandate from middle to "leaf".
func subChain(t *testing.T) (root, sub json.RawMessage) {
	r := echoGrant()
	r.PrincipalID, r.DelegateID = "root", "middle"
	r.Scope = []string{"conformance.echo", "conformance.fail"}
	r.ValidUntil = rfc(mandateClock.Add(2 * time.Hour))
	root = signMandate(t, r, seedKey(1), nil)
	l := echoGrant()
	l.PrincipalID, l.DelegateID = "middle", "leaf"
	return root, signMandate(t, l, seedKey(3), root)
}

// TestSubDelegationGate: a narrowed chain succeeds with the root principal
// recorded; a widened or lengthened child, and a revoked ancestor, are
// mandate_invalid.
func TestSubDelegationGate(t *testing.T) {
	store := evidence.NewMemory()
	b := mandateBoundary(t, store, "")
	root, sub := subChain(t)
	leaf := NewCaller("leaf", "api_key", nil)
	res := invokeMandated(t, b, "conformance.echo", sub, leaf, "")
	if res.Outcome != chp.OutcomeSuccess {
		t.Fatalf("valid chain: %+v", res.Denial)
	}
	recs, _ := store.Replay(context.Background(), evidence.Query{CorrelationID: res.Correlation.CorrelationID})
	var ev struct{ Subject map[string]any }
	_ = json.Unmarshal(recs[0].Data, &ev)
	if ev.Subject["id"] != "leaf" || ev.Subject["principal"] != "middle" || ev.Subject["root_principal"] != "root" {
		t.Fatalf("chain subject %v", ev.Subject)
	}
	// The leaf's scope is narrower than the root's: conformance.fail is out.
	if code, _ := denialOf(t, invokeMandated(t, b, "conformance.fail", sub, leaf, "")); code != chp.CodePolicyBlocked {
		t.Errorf("outside the leaf scope: %s", code)
	}
	wide, long := echoGrant(), echoGrant()
	wide.PrincipalID, wide.DelegateID, wide.Scope = "middle", "leaf", []string{"conformance.*"}
	long.PrincipalID, long.DelegateID, long.ValidUntil = "middle", "leaf", rfc(mandateClock.Add(10*time.Hour))
	for name, c := range map[string]struct {
		raw   json.RawMessage
		check string
	}{
		"widened scope":     {signMandate(t, wide, seedKey(3), root), "attenuation_scope"},
		"lengthened window": {signMandate(t, long, seedKey(3), root), "attenuation_window"},
	} {
		code, details := denialOf(t, invokeMandated(t, b, "conformance.echo", c.raw, leaf, ""))
		if checks, _ := details["checks"].(map[string]any); code != chp.CodeMandateInvalid || checks[c.check] != false {
			t.Errorf("%s: %s %v", name, code, details)
		}
	}
	// Revoking the root kills the sub.
	rm, _ := chp.ParseMandate(root)
	rev, err := chp.SignMandateRevocation("root", rm.MandateID, rfc(mandateClock), "", seedKey(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AcceptRevocation(rev, true); err != nil {
		t.Fatal(err)
	}
	code, details := denialOf(t, invokeMandated(t, b, "conformance.echo", sub, leaf, ""))
	if checks, _ := details["checks"].(map[string]any); code != chp.CodeMandateInvalid || checks["parent_valid"] != false {
		t.Errorf("revoked root: %s %v", code, details)
	}
}

// TestMandateRevocation: a revocation under the mandate's principal key is
// accepted, served, kept in the sidecar file across a restart and makes the
// mandate mandate_invalid; a tampered statement is refused and not stored;
// a self-consistent statement under another key is inert.
func TestMandateRevocation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "revocations.jsonl")
	store := evidence.NewMemory()
	b := mandateBoundary(t, store, file)
	key := seedKey(1)
	mandate := signMandate(t, echoGrant(), key, nil)
	id := mandateIDOf(t, mandate)
	if res := invokeMandated(t, b, "conformance.echo", mandate, nil, "inv_before"); res.Outcome != chp.OutcomeSuccess {
		t.Fatalf("before revocation: %+v", res.Denial)
	}
	// Tampered: retargeted after signing.
	good, _ := chp.SignMandateRevocation("principal", id, rfc(mandateClock), "lost", key)
	if _, err := b.AcceptRevocation(edited(t, good, func(m map[string]any) { m["mandate_id"] = "mnd_other" }), true); !errors.Is(err, mandates.ErrBadRevocation) {
		t.Fatalf("tampered revocation: %v", err)
	}
	// Forged: another key, self-consistent, same id.
	forged, _ := chp.SignMandateRevocation("principal", id, rfc(mandateClock), "forgery", seedKey(7))
	if _, err := b.AcceptRevocation(forged, true); err != nil {
		t.Fatalf("a self-consistent statement is accepted (and inert): %v", err)
	}
	if res := invokeMandated(t, b, "conformance.echo", mandate, nil, ""); res.Outcome != chp.OutcomeSuccess {
		t.Fatalf("a revocation under another key revoked the mandate: %+v", res.Denial)
	}
	if a, err := b.AcceptRevocation(good, true); err != nil || !a.Accepted || a.MandateID != id || a.Principal != "principal" {
		t.Fatalf("revocation: %+v %v", a, err)
	}
	if _, err := b.AcceptRevocation(good, true); err != nil { // twice: kept once
		t.Fatal(err)
	}
	served := b.Revocations()
	if len(served.Mandates) != 2 || served.Keys == nil || !bytes.Contains(served.Mandates[1], []byte(id)) {
		t.Fatalf("served %d mandate revocations: %s", len(served.Mandates), served.Mandates)
	}
	code, _ := denialOf(t, invokeMandated(t, b, "conformance.echo", mandate, nil, ""))
	if code != chp.CodeMandateInvalid {
		t.Fatalf("after revocation: %s", code)
	}
	// An invocation recorded before the revocation still replays (gate 0
	// precedes gate 5): the revocation withdraws authority, not history.
	if res := invokeMandated(t, b, "conformance.echo", mandate, nil, "inv_before"); res.Outcome != chp.OutcomeSuccess || !res.Replayed {
		t.Fatalf("replay after revocation: %+v", res)
	}
	// Nothing of it went into the evidence store.
	recs, _ := store.Replay(context.Background(), evidence.Query{})
	for _, r := range recs {
		if bytes.Contains(r.Data, []byte("mandate-revocation")) {
			t.Fatal("a revocation reached the evidence store")
		}
	}
	// A torn last line (a crash mid-write) is skipped, and the next
	// statement does not join it.
	f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"kind":"mandate-rev`)
	f.Close()
	b2 := mandateBoundary(t, evidence.NewMemory(), file)
	if code, _ := denialOf(t, invokeMandated(t, b2, "conformance.echo", mandate, nil, "")); code != chp.CodeMandateInvalid {
		t.Fatalf("after a restart: %s", code)
	}
	other := signMandate(t, echoGrant(), key, nil)
	late, _ := chp.SignMandateRevocation("principal", mandateIDOf(t, other), rfc(mandateClock), "", key)
	if _, err := b2.AcceptRevocation(late, true); err != nil {
		t.Fatal(err)
	}
	b3 := mandateBoundary(t, evidence.NewMemory(), file)
	if n := len(b3.Revocations().Mandates); n != 3 {
		t.Fatalf("%d revocations reloaded, want 3", n)
	}
}

// TestRevocationHead: chp-revocation-head-v1 over the held set — the empty
// set's digest, then the spec's mandate-revocation vector's (computed
// independently: sha256 of "m\x00{id}\x00{key}\n").
func TestRevocationHead(t *testing.T) {
	b := mandateBoundary(t, evidence.NewMemory(), "")
	if h := b.RevocationHead(); h != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("empty set: %s", h)
	}
	raw, err := os.ReadFile(specdata.Path("chp/vectors/mandate-revocation.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AcceptRevocation(raw, true); err != nil {
		t.Fatal(err)
	}
	if h := b.RevocationHead(); h != "b958e0a53171eaf7a6bd402c340562122260a6b4c556e0e43d95a12079d78406" {
		t.Fatalf("vector set: %s", h)
	}
	if ids := b.RevocationIDs(); len(ids) != 1 || !strings.HasPrefix(ids[0], "m\x00mnd_") {
		t.Fatalf("ids %q", ids)
	}
}

// TestMandateAncestorCap: a capped root bounds all its sub-mandates
// together — two sub-mandates of a 2-use root cannot spend three uses.
func TestMandateAncestorCap(t *testing.T) {
	b := mandateBoundary(t, evidence.NewMemory(), "")
	r := echoGrant()
	r.PrincipalID, r.DelegateID, r.MaxInvocations = "root", "middle", 2
	root := signMandate(t, r, seedKey(1), nil)
	l := echoGrant()
	l.PrincipalID, l.DelegateID, l.MaxInvocations = "middle", "leaf", 2
	subA, subB := signMandate(t, l, seedKey(3), root), signMandate(t, l, seedKey(3), root)
	for i, sub := range []json.RawMessage{subA, subB} {
		if res := invokeMandated(t, b, "conformance.echo", sub, nil, ""); res.Outcome != chp.OutcomeSuccess {
			t.Fatalf("use %d: %+v", i, res.Denial)
		}
	}
	res := invokeMandated(t, b, "conformance.echo", subA, nil, "")
	code, details := denialOf(t, res)
	if code != chp.CodeMandateExhausted || details["mandate_id"] != mandateIDOf(t, root) || details["used"] != 2.0 {
		t.Fatalf("third use across the root's cap: %s %v", code, details)
	}
}

// TestSignedStatementsMatchSchemas: the mandates, sub-mandates and
// revocations capmesh signs validate against the upstream schemas.
func TestSignedStatementsMatchSchemas(t *testing.T) {
	root, sub := subChain(t)
	g := echoGrant()
	g.MaxInvocations = 3
	for name, raw := range map[string]json.RawMessage{"root": root, "sub": sub, "capped": signMandate(t, g, seedKey(1), nil)} {
		if err := schema.Validate("mandate", raw); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	rev, err := chp.SignMandateRevocation("root", mandateIDOf(t, root), rfc(mandateClock), "", seedKey(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate("mandate-revocation", rev); err != nil {
		t.Error(err)
	}
}

// TestMandateUsesSurviveRestart: with a uses file, a restart keeps the
// count of a capped mandate; a torn last line and the uses of expired
// mandates are dropped (and the file rewritten without them); a use that
// cannot be recorded fails the invocation instead of going uncounted.
func TestMandateUsesSurviveRestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "uses.jsonl")
	clock := mandateClock
	open := func() *Boundary {
		b, err := New(Config{HostID: "test-host", Now: func() time.Time { return clock }, MandateUsesFile: file})
		if err != nil {
			t.Fatal(err)
		}
		if err := RegisterFixtures(b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	g := echoGrant()
	g.MaxInvocations = 2
	capped := signMandate(t, g, seedKey(1), nil)
	b := open()
	if res := invokeMandated(t, b, "conformance.echo", capped, nil, "inv_1"); res.Outcome != chp.OutcomeSuccess {
		t.Fatalf("first use: %+v", res.Denial)
	}
	b = open()
	if res := invokeMandated(t, b, "conformance.echo", capped, nil, "inv_2"); res.Outcome != chp.OutcomeSuccess {
		t.Fatalf("second use: %+v", res.Denial)
	}
	f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"mandate_id":"mnd_torn`)
	f.Close()
	b = open()
	code, details := denialOf(t, invokeMandated(t, b, "conformance.echo", capped, nil, "inv_3"))
	if code != chp.CodeMandateExhausted || details["used"] != 2.0 {
		t.Fatalf("third use after restarts: %s %v", code, details)
	}
	if data, _ := os.ReadFile(file); bytes.Contains(data, []byte("mnd_torn")) || bytes.Count(data, []byte("\n")) != 2 {
		t.Fatalf("uses file after reload:\n%s", data)
	}
	// Once the mandate has expired its uses are dropped at the next start.
	clock = mandateClock.Add(2 * time.Hour)
	open()
	if data, _ := os.ReadFile(file); len(data) != 0 {
		t.Fatalf("expired uses kept:\n%s", data)
	}
	// A use that cannot be written is an error, not an uncounted success.
	clock = mandateClock
	b, err = New(Config{HostID: "test-host", Now: func() time.Time { return clock },
		MandateUsesFile: filepath.Join(t.TempDir(), "missing", "uses.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	if err := RegisterFixtures(b); err != nil {
		t.Fatal(err)
	}
	_, err = b.Invoke(context.Background(), &chp.InvocationEnvelope{CapabilityID: "conformance.echo",
		Payload: json.RawMessage(`{}`), Mandate: capped})
	if err == nil || !strings.Contains(err.Error(), "mandate use") {
		t.Fatalf("unrecorded use: %v", err)
	}
}
