package chphttp_test

import (
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/chp/boundary/evlog"
	"github.com/capmesh/capmesh/chp/chphttp"
	"github.com/capmesh/capmesh/chp/witnessing"
	"github.com/capmesh/capmesh/evidence"
)

func do(t *testing.T, h http.Handler, method, path, body string) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	var out map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	return rec.Code, out
}

func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

// TestWitnessRoutes pins the HTTP statuses and codes of witnessing:
// 400 invalid_witness, 409 head_mismatch and revocation_head_mismatch,
// 200 for an accepted statement served back by /witnesses, 400 for an
// unknown head scheme, 404 for an unknown correlation, 501 for the log
// routes of a host without a key; and that they need the key.
func TestWitnessRoutes(t *testing.T) {
	b := fixtureBoundary(t, evidence.NewMemory())
	h := chphttp.Handler(b, &chphttp.Options{SharedKeys: []string{"k"}})
	authed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("X-CHP-Key", "k")
		h.ServeHTTP(w, r)
	})
	if code, _ := do(t, h, "GET", "/head", ""); code != http.StatusUnauthorized {
		t.Fatalf("unauthenticated /head: %d", code)
	}
	if code, _ := do(t, authed, "POST", "/invoke", `{"capability_id":"conformance.echo","correlation_id":"c1","payload":{"value":"x"}}`); code != 200 {
		t.Fatal(code)
	}
	code, head := do(t, authed, "GET", "/head", "")
	if code != 200 || head["scheme"] != witnessing.StoreHeadV1 || head["revocation_head"] != witnessing.EmptyRevocationHead {
		t.Fatalf("/head: %d %v", code, head)
	}
	seq := uint64(head["sequence"].(float64))
	sh := head["store_head"].(string)
	_, key, _ := ed25519.GenerateKey(nil)
	stmt := func(host, storeHead, rev string) string {
		raw, err := witnessing.NewChainWitness(host, seq, storeHead, rev, "w", key, "2026-01-01T00:00:00Z")
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	for _, tc := range []struct {
		body     string
		status   int
		wantCode string
	}{
		{`{"kind":"chain-witness"`, 400, "invalid_witness"},
		{stmt("other", sh, ""), 400, "invalid_witness"},
		{stmt("test-host", strings.Repeat("0", 64), ""), 409, "head_mismatch"},
		{stmt("test-host", sh, strings.Repeat("a", 64)), 409, "revocation_head_mismatch"},
		{stmt("test-host", sh, witnessing.EmptyRevocationHead), 200, ""},
	} {
		code, out := do(t, authed, "POST", "/witness", tc.body)
		if code != tc.status || errCode(out) != tc.wantCode {
			t.Errorf("POST /witness: %d %v, want %d %s", code, out, tc.status, tc.wantCode)
		}
	}
	if _, out := do(t, authed, "GET", "/witnesses", ""); len(out["witnesses"].([]any)) != 1 {
		t.Fatalf("/witnesses: %v", out)
	}
	for path, want := range map[string]int{
		"/head?scheme=chp-store-head-v9":                                  400,
		"/head?scheme=chp-store-head-v2":                                  200,
		"/head/inclusion/c1":                                              200,
		"/head/inclusion/never":                                           404,
		"/head/consistency?first=1":                                       400,
		"/head/consistency?first=1&second=" + strconv.FormatUint(seq, 10): 200,
		"/log/head":                 501,
		"/log/inclusion?sequence=1": 501,
		"/anchors":                  200,
	} {
		if code, out := do(t, authed, "GET", path, ""); code != want {
			t.Errorf("GET %s: %d %v, want %d", path, code, out, want)
		}
	}
	if code, out := do(t, authed, "POST", "/anchors", `{"kind":"store-head-anchor"}`); code != 400 || errCode(out) != "invalid_witness" {
		t.Errorf("POST /anchors: %d %v", code, out)
	}
}

// TestWitnessQuota: POST /witness refuses one witness's flood of distinct
// statements past evlog.MaxPerIssuer with 507 issuer_quota_exceeded, while
// another witness gets in and a statement posted again is 200 and kept
// once.
func TestWitnessQuota(t *testing.T) {
	b := fixtureBoundary(t, evidence.NewMemory())
	h := chphttp.Handler(b, nil)
	if code, _ := do(t, h, "POST", "/invoke", `{"capability_id":"conformance.echo","correlation_id":"c1","payload":{"value":"x"}}`); code != 200 {
		t.Fatal(code)
	}
	_, head := do(t, h, "GET", "/head", "")
	seq, sh := uint64(head["sequence"].(float64)), head["store_head"].(string)
	_, flood, _ := ed25519.GenerateKey(nil)
	_, other, _ := ed25519.GenerateKey(nil)
	stmt := func(key ed25519.PrivateKey, i int) string {
		at := "2026-01-01T00:00:" + strconv.Itoa(10+i) + "Z"
		raw, err := witnessing.NewChainWitness("test-host", seq, sh, "", "w", key, at)
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	for i := range evlog.MaxPerIssuer + 3 {
		code, out := do(t, h, "POST", "/witness", stmt(flood, i))
		if want := 200; i >= evlog.MaxPerIssuer {
			if code != http.StatusInsufficientStorage || errCode(out) != "issuer_quota_exceeded" {
				t.Fatalf("statement %d past the quota: %d %v", i, code, out)
			}
		} else if code != want {
			t.Fatalf("statement %d: %d %v", i, code, out)
		}
	}
	for _, body := range []string{stmt(flood, 0), stmt(other, 0), stmt(other, 0)} {
		if code, out := do(t, h, "POST", "/witness", body); code != 200 {
			t.Fatalf("%d %v", code, out)
		}
	}
	if _, out := do(t, h, "GET", "/witnesses", ""); len(out["witnesses"].([]any)) != evlog.MaxPerIssuer+1 {
		t.Fatalf("%d statements kept, want %d", len(out["witnesses"].([]any)), evlog.MaxPerIssuer+1)
	}
}
