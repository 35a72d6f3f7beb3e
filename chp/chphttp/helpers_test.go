package chphttp_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/chphttp"
	"github.com/capmesh/capmesh/evidence"
)

// fixtureBoundary is a boundary with the conformance fixture profile.
func fixtureBoundary(t *testing.T, store evidence.Store) *boundary.Boundary {
	t.Helper()
	b, err := boundary.New(boundary.Config{HostID: "test-host", Store: store,
		Policy: boundary.FixturePolicy(), Safety: boundary.FixtureSafety()})
	if err != nil {
		t.Fatal(err)
	}
	if err := boundary.RegisterFixtures(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMalformedSubjectIs400: an envelope whose subject is not strict JSON
// (a duplicate key) is a bad request, not an evidence failure, and records
// nothing.
func TestMalformedSubjectIs400(t *testing.T) {
	store := evidence.NewMemory()
	b := fixtureBoundary(t, store)
	rec := httptest.NewRecorder()
	chphttp.Handler(b, nil).ServeHTTP(rec, httptest.NewRequest("POST", "/invoke",
		strings.NewReader(`{"capability_id":"conformance.echo","subject":{"id":"a","id":"b"}}`)))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("HTTP status %d, want 400: %s", rec.Code, rec.Body)
	}
	if store.LastSequence() != 0 {
		t.Errorf("a rejected envelope left %d events", store.LastSequence())
	}
}

// TestVerifyUnknownCorrelationIs404: /verify of a correlation the host holds
// no evidence for is 404 with the error envelope (as /export), never
// {valid: true, event_count: 0}; a known one is 200 and valid.
func TestVerifyUnknownCorrelationIs404(t *testing.T) {
	b := fixtureBoundary(t, evidence.NewMemory())
	h := chphttp.Handler(b, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/invoke", strings.NewReader(`{"capability_id":"conformance.echo","correlation_id":"known"}`)))
	if rec.Code != http.StatusOK {
		t.Fatalf("invoke: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/verify/known", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"valid":true`) {
		t.Errorf("known correlation: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/verify/never-seen", nil))
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `"code":"not_found"`) || strings.Contains(rec.Body.String(), `"valid"`) {
		t.Errorf("unknown correlation: %d %s", rec.Code, rec.Body)
	}
}
