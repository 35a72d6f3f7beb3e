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
