package dashboard

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/access"
	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/chphttp"
	"github.com/capmesh/capmesh/registry/descriptor"
)

// exportedBundle invokes a conformance fixture on a real, signed boundary
// and returns the exported bundle of its correlation.
func exportedBundle(t *testing.T) []byte {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b, err := boundary.New(boundary.Config{HostID: "dash-test", Key: key, Policy: boundary.FixturePolicy(), Safety: boundary.FixtureSafety()})
	if err != nil {
		t.Fatal(err)
	}
	if err := boundary.RegisterFixtures(b); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	env := &chp.InvocationEnvelope{CapabilityID: "conformance.echo", Payload: json.RawMessage(`{"value":"v"}`),
		Correlation: chp.CorrelationContext{CorrelationID: "corr-dash"}}
	if res, err := b.Invoke(ctx, env); err != nil || res.Outcome != chp.OutcomeSuccess {
		t.Fatalf("invoke: %+v %v", res, err)
	}
	bundle, err := b.Export(ctx, "corr-dash")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(bundle)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestEvidenceStepsVerified: every step of an intact chain verifies, and
// so does the bundle.
func TestEvidenceStepsVerified(t *testing.T) {
	v := verifyEvidence("corr-dash", exportedBundle(t))
	if !v.Valid || v.Error != "" || len(v.Events) < 3 {
		t.Fatalf("intact bundle: valid %v, error %q, %d events, reason %q", v.Valid, v.Error, len(v.Events), v.Reason)
	}
	for _, s := range v.Events {
		if !s.OK || !s.Links || !s.Recomputed || s.Problem != "" {
			t.Errorf("step %d: %+v", s.Sequence, s)
		}
	}
	if v.Events[0].PrevHash != "" || v.Events[1].PrevHash != v.Events[0].ContentHash {
		t.Errorf("chain: %+v", v.Events[:2])
	}
}

// TestEvidenceStepShowsWhereTheChainBreaks alters one event of the
// exported bundle (its outcome, keeping its stored hashes): the page marks
// that step as failing its recomputation, the steps before it as
// verified, and the whole chain as not verified — whatever the node says.
func TestEvidenceStepShowsWhereTheChainBreaks(t *testing.T) {
	var b map[string]any
	if err := json.Unmarshal(exportedBundle(t), &b); err != nil {
		t.Fatal(err)
	}
	events := b["events"].([]any)
	last := events[len(events)-1].(map[string]any)
	last["capability_id"] = "conformance.tampered"
	raw, _ := json.Marshal(b)
	v := verifyEvidence("corr-dash", raw)
	if v.Valid {
		t.Fatal("a tampered bundle verified")
	}
	n := len(v.Events)
	for _, s := range v.Events[:n-1] {
		if !s.OK {
			t.Errorf("step %d before the tampered one: %+v", s.Sequence, s)
		}
	}
	bad := v.Events[n-1]
	if bad.OK || bad.Recomputed || !strings.Contains(bad.Problem, "content_hash") {
		t.Errorf("tampered step: %+v", bad)
	}
}

// TestEvidenceNotABundle: an export that is not a bundle is an error on
// the page, never a verified chain.
func TestEvidenceNotABundle(t *testing.T) {
	for _, in := range []string{`[]`, `{"events":"x"}`, `{}`} {
		v := verifyEvidence("c", []byte(in))
		if v.Valid {
			t.Errorf("%s verified", in)
		}
	}
}

// TestSessions: a session lasts sessionTTL, their number is bounded, and
// an unknown or dropped cookie is no session.
func TestSessions(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := newSessions(func() time.Time { return now })
	id := s.add("k1")
	req := func(id string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/ui/", nil)
		r.AddCookie(&http.Cookie{Name: cookieName, Value: id})
		return r
	}
	if k, ok := s.get(req(id)); !ok || k != "k1" {
		t.Fatalf("fresh session: %q %v", k, ok)
	}
	if _, ok := s.get(req("forged")); ok {
		t.Fatal("an unknown session id was accepted")
	}
	now = now.Add(sessionTTL)
	if _, ok := s.get(req(id)); ok {
		t.Fatal("an expired session was accepted")
	}
	for i := 0; i < maxSessions+10; i++ {
		s.add("k")
	}
	if len(s.m) > maxSessions {
		t.Fatalf("%d sessions kept, bound %d", len(s.m), maxSessions)
	}
	id = s.add("k2")
	s.drop(req(id))
	if _, ok := s.get(req(id)); ok {
		t.Fatal("a dropped session was accepted")
	}
}

// TestCrossOriginFormRefused: a sign-in or sign-out posted from another
// origin is refused before anything happens.
func TestCrossOriginFormRefused(t *testing.T) {
	d, err := New(Config{Node: func() string { return "http://127.0.0.1:1" }})
	if err != nil {
		t.Fatal(err)
	}
	h := d.Handler()
	for _, path := range []string{"/ui/login", "/ui/logout"} {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader("key=k"))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Origin", "http://evil.example")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusForbidden {
			t.Errorf("%s from another origin: %d", path, w.Code)
		}
		if w.Result().Header.Get("Set-Cookie") != "" {
			t.Errorf("%s from another origin set a cookie", path)
		}
	}
}

// TestEveryAnswerCarriesTheCSP: pages, assets and errors all carry the
// Content-Security-Policy that keeps any injected script from running.
func TestEveryAnswerCarriesTheCSP(t *testing.T) {
	d, err := New(Config{Node: func() string { return "http://127.0.0.1:1" }})
	if err != nil {
		t.Fatal(err)
	}
	h := d.Handler()
	for _, path := range []string{"/ui/login", "/ui/static/app.js", "/ui/static/nope.js", "/ui/evidence?corr=" + strings.Repeat("x", maxCorrelation+1)} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if csp := w.Result().Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("%s (%d): CSP %q", path, w.Code, csp)
		}
	}
}

// TestRelative: expiry is said relative to now, far ones as a date.
func TestRelative(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		t    time.Time
		want string
	}{
		{time.Time{}, "never"},
		{now.Add(90 * time.Second), "in 1m30s"},
		{now.Add(-2 * time.Minute), "2m0s ago"},
		{now.Add(30 * 24 * time.Hour), "2026-01-31"},
		{descriptor.NodeLease, "with its node"},
	} {
		if got := relative(c.t, now); got != c.want {
			t.Errorf("relative(%v) = %q, want %q", c.t, got, c.want)
		}
	}
}

// TestQuietStreamStillRefreshes: with no registry event, the stream still
// tells the page to refresh after the quiet interval, so that verdicts
// lapsing by themselves and expiry countdowns do not go stale. The node
// here answers ipc.watch with no events after a short wait.
func TestQuietStreamStillRefreshes(t *testing.T) {
	nodeSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		select {
		case <-time.After(50 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		res, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{"revision": 5, "events": []any{}}})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(res)
	}))
	defer nodeSrv.Close()
	d, err := New(Config{Node: func() string { return nodeSrv.URL }})
	if err != nil {
		t.Fatal(err)
	}
	d.quiet = 300 * time.Millisecond
	ui := httptest.NewServer(d.Handler())
	defer ui.Close()
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ui.URL+"/ui/events?since=5", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	buf := make([]byte, 4096)
	var got strings.Builder
	for !strings.Contains(got.String(), "event: registry") {
		n, err := res.Body.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("stream ended before a refresh (%v): %q", err, got.String())
		}
	}
	if !strings.HasPrefix(got.String(), "retry: 2000\nevent: hello\n") {
		t.Errorf("stream: %q", got.String())
	}
}

// TestStaleSessionIsDropped: a session whose key the policy no longer
// accepts (the node's keys changed) ends, and the browser is anonymous
// again — the public pages and the sign-in form stay reachable — while a
// wrong key presented in X-CHP-Key is still a 401.
func TestStaleSessionIsDropped(t *testing.T) {
	pol := access.NewPolicy(access.Config{Keys: &chphttp.Options{SharedKeys: []string{"new-key"}}})
	d, err := New(Config{Node: func() string { return "http://127.0.0.1:1" }, Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	h := d.Handler()
	id := d.sessions.add("old-key")
	r := httptest.NewRequest(http.MethodGet, "/ui/login", nil)
	r.AddCookie(&http.Cookie{Name: cookieName, Value: id})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("sign-in form with a stale session: %d", w.Code)
	}
	if _, ok := d.sessions.get(r); ok {
		t.Fatal("the stale session was kept")
	}
	r = httptest.NewRequest(http.MethodGet, "/ui/login", nil)
	r.Header.Set(access.HeaderKey, "old-key")
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized {
		t.Fatalf("a wrong X-CHP-Key: %d", w.Code)
	}
}
