package chphttp_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/chphttp"
)

// TestInvokeTraceparentHeader: POST /invoke takes the caller's trace
// context from the W3C traceparent header: its trace id is recorded as
// correlation.trace_id. A malformed header is ignored, and an envelope's
// own trace_id is kept.
func TestInvokeTraceparentHeader(t *testing.T) {
	srv := httptest.NewServer(chphttp.Handler(fixtureBoundary(t, nil), nil))
	defer srv.Close()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		header, body, want string
	}{
		{tp, `{"capability_id":"conformance.echo","payload":{"value":1}}`, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", `{"capability_id":"conformance.echo","payload":{"value":1}}`, ""},
		{tp, `{"capability_id":"conformance.echo","payload":{"value":1},"correlation":{"correlation_id":"c-own","trace_id":"own"}}`, "own"},
	} {
		req, err := http.NewRequest("POST", srv.URL+"/invoke", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Traceparent", tc.header)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var res chp.InvocationResult
		err = json.NewDecoder(resp.Body).Decode(&res)
		resp.Body.Close()
		if err != nil || !res.Success {
			t.Fatalf("%s: %+v, %v", tc.header, res, err)
		}
		got := ""
		if res.Correlation.TraceID != nil {
			got = *res.Correlation.TraceID
		}
		if got != tc.want {
			t.Errorf("traceparent %q: trace_id %q, want %q", tc.header, got, tc.want)
		}
	}
}
