package chp

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var mandateNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func mandateKey(t testing.TB, seed byte) ed25519.PrivateKey {
	t.Helper()
	s := make([]byte, ed25519.SeedSize)
	s[0] = seed
	return ed25519.NewKeyFromSeed(s)
}

func iso(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// grant is a valid one-hour single-hop grant to "delegate" at mandateNow.
func grant() MandateGrant {
	return MandateGrant{PrincipalID: "principal", DelegateID: "delegate", Scope: []string{"demo.echo", "demo.more.*"},
		ValidFrom: iso(mandateNow.Add(-time.Minute)), ValidUntil: iso(mandateNow.Add(time.Hour)), CreatedAt: iso(mandateNow.Add(-time.Minute))}
}

func signed(t testing.TB, g MandateGrant, key ed25519.PrivateKey, parent json.RawMessage) json.RawMessage {
	t.Helper()
	raw, err := SignMandate(g, key, parent)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func verifyRaw(t testing.TB, raw []byte, opts MandateVerifyOptions) *MandateVerification {
	t.Helper()
	m, err := ParseMandate(raw)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return VerifyMandate(m, opts)
}

// failed lists the failed checks of v.
func failed(v *MandateVerification) []string {
	var out []string
	for _, c := range v.Checks {
		if !c.OK {
			out = append(out, c.Name)
		}
	}
	return out
}

// edit re-encodes raw after f changes its decoded object.
func edit(t testing.TB, raw []byte, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMandateVectorsVerify(t *testing.T) {
	for _, name := range []string{"mandate.json", "mandate-chain.json", "mandate-capped.json"} {
		raw, err := os.ReadFile(filepath.Join(specDir(t), "vectors", name))
		if err != nil {
			t.Fatal(err)
		}
		m, err := ParseMandate(raw)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		at := m.ValidUntil.Add(-time.Hour)
		if v := VerifyMandate(m, MandateVerifyOptions{At: at}); !v.Valid {
			t.Errorf("%s: %s %v", name, v.Reason, v.Checks)
		}
		if v := VerifyMandate(m, MandateVerifyOptions{At: m.ValidUntil.Add(time.Second)}); v.Valid {
			t.Errorf("%s verifies after valid_until", name)
		}
	}
	raw, err := os.ReadFile(filepath.Join(specDir(t), "vectors", "mandate-revocation.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseMandateRevocation(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyMandateRevocation(s); err != nil {
		t.Fatal(err)
	}
}

func TestMandateValid(t *testing.T) {
	raw := signed(t, grant(), mandateKey(t, 1), nil)
	v := verifyRaw(t, raw, MandateVerifyOptions{At: mandateNow, Delegate: "delegate"})
	if !v.Valid {
		t.Fatalf("valid mandate refused: %s", v.Reason)
	}
	m, _ := ParseMandate(raw)
	if m.RootPrincipal() != "principal" || m.Depth != 0 || m.MaxInvocations != 0 {
		t.Fatalf("parsed %+v", m)
	}
}

// TestMandateRefusals pins each single-hop refusal to the check that makes it.
func TestMandateRefusals(t *testing.T) {
	key := mandateKey(t, 1)
	good := signed(t, grant(), key, nil)
	cases := []struct {
		name  string
		raw   []byte
		opts  MandateVerifyOptions
		check string
	}{
		{"scope widened after signing", edit(t, good, func(m map[string]any) { m["scope"] = []string{"*"} }),
			MandateVerifyOptions{At: mandateNow}, "signature"},
		{"signed by another key", edit(t, good, func(m map[string]any) {
			other := signed(t, grant(), mandateKey(t, 2), nil)
			var o map[string]any
			_ = json.Unmarshal(other, &o)
			m["signature"] = o["signature"]
		}), MandateVerifyOptions{At: mandateNow}, "signature"},
		{"attestation for another host", edit(t, good, func(m map[string]any) {
			m["principal"].(map[string]any)["host_id"] = "someone-else"
		}), MandateVerifyOptions{At: mandateNow}, "principal_identity"},
		{"wrong delegate", good, MandateVerifyOptions{At: mandateNow, Delegate: "mallory"}, "delegate"},
		{"expired", good, MandateVerifyOptions{At: mandateNow.Add(2 * time.Hour)}, "temporal"},
		{"not yet valid", good, MandateVerifyOptions{At: mandateNow.Add(-time.Hour)}, "temporal"},
		{"revoked", good, MandateVerifyOptions{At: mandateNow, Revoked: func(string, string) bool { return true }}, "not_revoked"},
	}
	for _, c := range cases {
		v := verifyRaw(t, c.raw, c.opts)
		if got := failed(v); len(got) != 1 || got[0] != c.check {
			t.Errorf("%s: failed checks %v, want [%s]", c.name, got, c.check)
		}
	}
}

func TestMandateScopeGrammar(t *testing.T) {
	scope := []string{"demo.echo", "chp.adapters.audit.*"}
	for id, want := range map[string]bool{"demo.echo": true, "demo.echo2": false, "demo": false,
		"chp.adapters.audit.x": true, "chp.adapters.audit.": true, "chp.adapters.auditx": false} {
		if MandateScopeAllows(scope, id) != want {
			t.Errorf("%q: want %v", id, want)
		}
	}
	if MandateScopeAllows(nil, "demo.echo") {
		t.Error("an empty scope allows something")
	}
	if !MandateScopeAllows([]string{"*"}, "any.thing") {
		t.Error("* does not allow everything")
	}
}

// chain returns a root from rootKey to "middle" and a sub-mandate from
// middle to "leaf" made by g (PrincipalID set to middle).
func chain(t testing.TB, g MandateGrant) (root, sub json.RawMessage) {
	r := grant()
	r.PrincipalID, r.DelegateID = "root", "middle"
	r.ValidUntil = iso(mandateNow.Add(2 * time.Hour))
	r.MaxInvocations = 5
	root = signed(t, r, mandateKey(t, 1), nil)
	g.PrincipalID = "middle"
	return root, signed(t, g, mandateKey(t, 3), root)
}

func leafGrant() MandateGrant {
	g := grant()
	g.DelegateID, g.Scope, g.MaxInvocations = "leaf", []string{"demo.echo"}, 2
	return g
}

func TestMandateChainValid(t *testing.T) {
	_, sub := chain(t, leafGrant())
	v := verifyRaw(t, sub, MandateVerifyOptions{At: mandateNow, Delegate: "leaf"})
	if !v.Valid {
		t.Fatalf("valid chain refused: %s %v", v.Reason, v.Checks)
	}
	m, _ := ParseMandate(sub)
	if m.RootPrincipal() != "root" || m.Principal.HostID != "middle" || m.Depth != 1 {
		t.Fatalf("chain parsed as %+v", m)
	}
}

// TestMandateChainRefusals pins each sub-delegation refusal to its check.
func TestMandateChainRefusals(t *testing.T) {
	midKey := mandateKey(t, 3)
	resign := func(raw []byte, f func(m map[string]any)) []byte {
		// Edit the child's header and sign it again with the middle key, so
		// only the attenuation check can catch it.
		var m map[string]any
		_ = json.Unmarshal(edit(t, raw, f), &m)
		parent, _ := json.Marshal(m["parent"])
		g := MandateGrant{PrincipalID: "middle", MandateID: m["mandate_id"].(string), DelegateID: m["delegate_id"].(string),
			ValidFrom: m["valid_from"].(string), ValidUntil: m["valid_until"].(string), CreatedAt: m["created_at"].(string)}
		for _, s := range m["scope"].([]any) {
			g.Scope = append(g.Scope, s.(string))
		}
		if c, ok := m["max_invocations"].(float64); ok {
			g.MaxInvocations = int64(c)
		}
		return signed(t, g, midKey, parent)
	}
	root, sub := chain(t, leafGrant())
	cases := []struct {
		name  string
		raw   []byte
		check string
	}{
		{"widened scope, tampered", edit(t, sub, func(m map[string]any) { m["scope"] = []string{"demo.echo", "demo.other"} }), "signature"},
		{"widened scope, re-signed", resign(sub, func(m map[string]any) { m["scope"] = []string{"demo.echo", "demo.other"} }), "attenuation_scope"},
		{"lengthened window", resign(sub, func(m map[string]any) { m["valid_until"] = iso(mandateNow.Add(10 * time.Hour)) }), "attenuation_window"},
		{"earlier start", resign(sub, func(m map[string]any) { m["valid_from"] = iso(mandateNow.Add(-time.Hour)) }), "attenuation_window"},
		{"raised cap", resign(sub, func(m map[string]any) { m["max_invocations"] = 9 }), "attenuation_cap"},
		{"dropped cap", resign(sub, func(m map[string]any) { delete(m, "max_invocations") }), "attenuation_cap"},
		{"broken join", signed(t, func() MandateGrant { g := leafGrant(); g.PrincipalID = "stranger"; return g }(), midKey, root), "delegate_join"},
		{"parent_id elsewhere", edit(t, sub, func(m map[string]any) { m["parent"].(map[string]any)["mandate_id"] = "mnd_other" }), "parent_id_match"},
		{"depth skipped", edit(t, sub, func(m map[string]any) { m["depth"] = 2 }), "depth"},
	}
	for _, c := range cases {
		v := verifyRaw(t, c.raw, MandateVerifyOptions{At: mandateNow, Delegate: "leaf"})
		got := failed(v)
		if !v.Valid && len(got) > 0 && contains(got, c.check) {
			continue
		}
		t.Errorf("%s: failed checks %v, want %s among them", c.name, got, c.check)
	}
	// A broken parent signature fails the chain through parent_valid.
	bad := edit(t, sub, func(m map[string]any) { m["parent"].(map[string]any)["scope"] = []string{"*"} })
	if v := verifyRaw(t, bad, MandateVerifyOptions{At: mandateNow}); v.Valid || !contains(failed(v), "parent_valid") {
		t.Errorf("tampered parent: %v", failed(v))
	}
}

func contains(s []string, x string) bool {
	for _, e := range s {
		if e == x {
			return true
		}
	}
	return false
}

// TestMandateChainRevokedLink revokes each link in turn: revoking any one
// (under its own principal's key) invalidates the leaf.
func TestMandateChainRevokedLink(t *testing.T) {
	_, sub := chain(t, leafGrant())
	m, err := ParseMandate(sub)
	if err != nil {
		t.Fatal(err)
	}
	for _, link := range []*Mandate{m, m.Parent} {
		revoked := func(id, key string) bool { return id == link.MandateID && key == link.Principal.PublicKey }
		if v := VerifyMandate(m, MandateVerifyOptions{At: mandateNow, Revoked: revoked}); v.Valid {
			t.Errorf("revoking %s left the chain valid", link.MandateID)
		}
		// The same id under another key revokes nothing.
		other := func(id, key string) bool { return id == link.MandateID && key == "another-key" }
		if v := VerifyMandate(m, MandateVerifyOptions{At: mandateNow, Revoked: other}); !v.Valid {
			t.Errorf("a revocation under another key invalidated the chain: %s", v.Reason)
		}
	}
}

// TestMandateChainTooDeep builds a chain one link over MandateMaxDepth.
func TestMandateChainTooDeep(t *testing.T) {
	g := grant()
	g.PrincipalID, g.DelegateID = "p0", "p1"
	raw := signed(t, g, mandateKey(t, 10), nil)
	for i := 1; i <= MandateMaxDepth+1; i++ {
		g.PrincipalID, g.DelegateID = "p"+string(rune('0'+i)), "p"+string(rune('0'+i+1))
		next, err := SignMandate(g, mandateKey(t, byte(10+i)), raw)
		if err != nil {
			t.Fatal(err)
		}
		if i <= MandateMaxDepth {
			if v := verifyRaw(t, next, MandateVerifyOptions{At: mandateNow}); !v.Valid {
				t.Fatalf("depth %d refused: %s", i, v.Reason)
			}
		} else if _, err := ParseMandate(next); !errors.Is(err, ErrBadMandate) || !strings.Contains(err.Error(), "deeper") {
			t.Fatalf("depth %d: err %v", i, err)
		}
		raw = next
	}
	// A depth claimed past the cap is refused by the depth check too.
	m, err := ParseMandate(signed(t, g, mandateKey(t, 3), signed(t, grant(), mandateKey(t, 1), nil)))
	if err != nil {
		t.Fatal(err)
	}
	m.Parent.Depth, m.Depth = MandateMaxDepth, MandateMaxDepth+1
	if v := VerifyMandate(m, MandateVerifyOptions{At: mandateNow}); !contains(failed(v), "depth") {
		t.Errorf("depth over the cap: %v", failed(v))
	}
}

func TestParseMandateRejects(t *testing.T) {
	good := signed(t, grant(), mandateKey(t, 1), nil)
	for name, raw := range map[string][]byte{
		"not an object":      []byte(`[1]`),
		"kind":               edit(t, good, func(m map[string]any) { m["kind"] = "bundle" }),
		"no valid_until":     edit(t, good, func(m map[string]any) { delete(m, "valid_until") }),
		"bad time":           edit(t, good, func(m map[string]any) { m["valid_from"] = "yesterday" }),
		"scope not strings":  edit(t, good, func(m map[string]any) { m["scope"] = []any{1} }),
		"cap zero":           edit(t, good, func(m map[string]any) { m["max_invocations"] = 0 }),
		"cap fraction":       edit(t, good, func(m map[string]any) { m["max_invocations"] = 1.5 }),
		"parent_id alone":    edit(t, good, func(m map[string]any) { m["parent_id"] = "mnd_x"; m["depth"] = 1 }),
		"no principal":       edit(t, good, func(m map[string]any) { delete(m, "principal") }),
		"other canonical":    edit(t, good, func(m map[string]any) { m["canonicalization"] = "chp-jcs-v1" }),
		"duplicate key":      []byte(`{"kind":"mandate","kind":"mandate"}`),
		"huge":               []byte(`"` + strings.Repeat("x", MaxMandateBytes) + `"`),
		"no delegate":        edit(t, good, func(m map[string]any) { m["delegate_id"] = "" }),
		"signature not obj":  edit(t, good, func(m map[string]any) { m["signature"] = "x" }),
		"parent not an obj":  edit(t, good, func(m map[string]any) { m["parent"] = 3 }),
		"depth without link": edit(t, good, func(m map[string]any) { m["depth"] = 1 }),
	} {
		if _, err := ParseMandate(raw); !errors.Is(err, ErrBadMandate) {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

func TestMandateRevocationVerify(t *testing.T) {
	key := mandateKey(t, 1)
	raw, err := SignMandateRevocation("principal", "mnd_1", iso(mandateNow), "lost laptop", key)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseMandateRevocation(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyMandateRevocation(s); err != nil {
		t.Fatal(err)
	}
	pub := s.Principal.PublicKey
	if !s.Revokes("mnd_1", pub) || s.Revokes("mnd_2", pub) || s.Revokes("mnd_1", "other") {
		t.Error("Revokes does not bind id and key")
	}
	for name, bad := range map[string][]byte{
		"retargeted": edit(t, raw, func(m map[string]any) { m["mandate_id"] = "mnd_other" }),
		"signed by the wrong key": edit(t, raw, func(m map[string]any) {
			o, _ := SignMandateRevocation("principal", "mnd_1", iso(mandateNow), "lost laptop", mandateKey(t, 2))
			var om map[string]any
			_ = json.Unmarshal(o, &om)
			m["signature"] = om["signature"]
		}),
		"attestation of another host": edit(t, raw, func(m map[string]any) { m["principal"].(map[string]any)["host_id"] = "x" }),
	} {
		s, err := ParseMandateRevocation(bad)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if VerifyMandateRevocation(s) == nil {
			t.Errorf("%s: verified", name)
		}
	}
	if _, err := ParseMandateRevocation([]byte(`{"kind":"mandate"}`)); !errors.Is(err, ErrBadMandate) {
		t.Errorf("a mandate parsed as a revocation: %v", err)
	}
}

// TestMandateSurvivesReencoding: forwarding (proposal 0004) may re-encode a
// mandate — another member order, indentation, escapes — and it still
// verifies, chain included: the signatures cover canonical headers.
func TestMandateSurvivesReencoding(t *testing.T) {
	_, sub := chain(t, leafGrant())
	var v any
	if err := json.Unmarshal(sub, &v); err != nil {
		t.Fatal(err)
	}
	pretty, err := json.MarshalIndent(v, "", "\t") // keys sorted, indented, HTML-escaped
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(pretty, sub) {
		t.Fatal("re-encoding changed nothing")
	}
	if r := verifyRaw(t, pretty, MandateVerifyOptions{At: mandateNow, Delegate: "leaf"}); !r.Valid {
		t.Fatalf("re-encoded chain: %s", r.Reason)
	}
}

// BenchmarkVerifyMandate: parse and verify a single-hop mandate and a
// one-link chain, as gate 5 does per invocation.
func BenchmarkVerifyMandate(b *testing.B) {
	single := signed(b, grant(), mandateKey(b, 1), nil)
	_, sub := chain(b, leafGrant())
	for name, raw := range map[string][]byte{"single": single, "chain": sub} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m, err := ParseMandate(raw)
				if err != nil {
					b.Fatal(err)
				}
				if !VerifyMandate(m, MandateVerifyOptions{At: mandateNow}).Valid {
					b.Fatal("invalid")
				}
			}
		})
	}
}
