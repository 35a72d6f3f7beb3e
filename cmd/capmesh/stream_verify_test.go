package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestStreamedBundleVerifies: on the fixture profile, a streamed
// invocation (SSE), its replay and its Last-Event-ID resume leave a bundle
// that `capmesh evidence verify --require-signed` accepts, exported from
// the host over its HTTP binding.
func TestStreamedBundleVerifies(t *testing.T) {
	a := &app{stdout: io.Discard, stderr: io.Discard, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	_, h, closeStore, err := chpFixtureBoundary(a, chpFixtureOptions{Signed: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	srv := httptest.NewServer(h)
	defer srv.Close()
	body := `{"capability_id":"conformance.stream","mode":"stream","invocation_id":"inv-cli","correlation_id":"cli-stream"}`
	for _, last := range []string{"", "", "1"} {
		req, err := http.NewRequest("POST", srv.URL+"/invoke", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || !strings.Contains(string(raw), "event: result") {
			t.Fatalf("stream answer %q: %s", ct, raw)
		}
	}
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"evidence", "verify", "--require-signed", srv.URL, "cli-stream"}, strings.NewReader(""), &out, &errb)
	if code != 0 || !strings.HasPrefix(out.String(), "VALID (signed, 5 events") {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
}
