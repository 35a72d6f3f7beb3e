package chphttp_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/chphttp"
	"github.com/capmesh/capmesh/evidence"
)

// TestRevocationsOverHTTP: over a loopback server with a named key, a
// mandate naming that key's caller works; POST /revocations of a tampered
// statement is 400 and keeps nothing, a non-issuer's (or one revoking a
// mandate never presented here) 403 not_issuer; the principal's statement is accepted
// and served by GET /revocations; the mandate is then mandate_invalid.
func TestRevocationsOverHTTP(t *testing.T) {
	b := fixtureBoundary(t, evidence.NewMemory())
	srv := httptest.NewServer(chphttp.Handler(b, &chphttp.Options{
		NamedKeys: []chphttp.NamedKey{{Name: "delegate", Key: "dk"}}}))
	defer srv.Close()
	call := func(method, path string, body []byte, key string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("X-CHP-Key", key)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return resp.StatusCode, out
	}
	seed := make([]byte, ed25519.SeedSize)
	key := ed25519.NewKeyFromSeed(seed)
	now := time.Now().UTC()
	mandate, err := chp.SignMandate(chp.MandateGrant{PrincipalID: "principal", DelegateID: "delegate",
		Scope: []string{"conformance.echo"}, ValidFrom: chp.FormatTime(now.Add(-time.Minute)),
		ValidUntil: chp.FormatTime(now.Add(time.Hour)), CreatedAt: chp.FormatTime(now.Add(-time.Minute))}, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := chp.ParseMandate(mandate)
	invoke := func() map[string]any {
		env, _ := json.Marshal(map[string]any{"capability_id": "conformance.echo", "payload": map[string]any{}, "mandate": mandate})
		code, res := call("POST", "/invoke", env, "dk")
		if code != http.StatusOK {
			t.Fatalf("invoke: %d %v", code, res)
		}
		return res
	}
	if res := invoke(); res["outcome"] != "success" {
		t.Fatalf("before revocation: %v", res)
	}
	stmt, err := chp.SignMandateRevocation("principal", m.MandateID, chp.FormatTime(now), "done", key)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := call("POST", "/revocations", stmt, ""); code != http.StatusUnauthorized {
		t.Errorf("unauthenticated POST: %d", code)
	}
	tampered := bytes.Replace(stmt, []byte(`"done"`), []byte(`"undone"`), 1)
	if code, out := call("POST", "/revocations", tampered, "dk"); code != http.StatusBadRequest || out["error"].(map[string]any)["code"] != "invalid_revocation" {
		t.Errorf("tampered: %d %v", code, out)
	}
	if code, out := call("POST", "/revocations", []byte(`{"kind":`), "dk"); code != http.StatusBadRequest {
		t.Errorf("malformed: %d %v", code, out)
	}
	// A non-issuer's statement for the same mandate id, and the issuer's
	// for a mandate never presented here: 403, nothing kept.
	impostor := ed25519.NewKeyFromSeed(append([]byte{1}, seed[1:]...))
	forged, _ := chp.SignMandateRevocation("principal", m.MandateID, chp.FormatTime(now), "done", impostor)
	unseen, _ := chp.SignMandateRevocation("principal", "mnd_never_presented", chp.FormatTime(now), "done", key)
	for name, raw := range map[string][]byte{"non-issuer": forged, "unseen mandate": unseen} {
		if code, out := call("POST", "/revocations", raw, "dk"); code != http.StatusForbidden || out["error"].(map[string]any)["code"] != "not_issuer" {
			t.Errorf("%s: %d %v", name, code, out)
		}
	}
	if _, set := call("GET", "/revocations", nil, "dk"); len(set["mandates"].([]any)) != 0 {
		t.Fatalf("refused statements kept: %v", set)
	}
	code, out := call("POST", "/revocations", stmt, "dk")
	if code != http.StatusOK || out["accepted"] != true || out["mandate_id"] != m.MandateID || out["principal"] != "principal" {
		t.Fatalf("revocation: %d %v", code, out)
	}
	code, set := call("GET", "/revocations", nil, "dk")
	mandates, _ := set["mandates"].([]any)
	if code != http.StatusOK || len(mandates) != 1 || mandates[0].(map[string]any)["reason"] != "done" || set["keys"] == nil {
		t.Fatalf("GET /revocations: %d %v", code, set)
	}
	res := invoke()
	if d, _ := res["denial"].(map[string]any); res["outcome"] != "denied" || d["code"] != chp.CodeMandateInvalid {
		t.Fatalf("after revocation: %v", res)
	}
}
