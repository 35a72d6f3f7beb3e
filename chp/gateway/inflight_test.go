package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestConcurrentRetryWaitsForTheFirstAttempt: a retry of a client
// invocation id that arrives while the first attempt is still at an owner
// waits for it and replays its result; the owner executes once.
func TestConcurrentRetryWaitsForTheFirstAttempt(t *testing.T) {
	var execs atomic.Int64
	entered, release := make(chan struct{}), make(chan struct{})
	member := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/host":
			_, _ = io.WriteString(w, `{"id":"m","capabilities":[{"id":"slow","version":"1.0.0"}]}`)
		case "/invoke":
			execs.Add(1)
			entered <- struct{}{}
			<-release
			_, _ = io.WriteString(w, `{"outcome":"success","success":true,"data":{"n":1}}`)
		}
	}))
	defer member.Close()
	g, err := New(Config{Members: []string{member.URL}})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Discover(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	defer srv.Close()

	waited := make(chan struct{})
	waiting = func(string) { close(waited) }
	defer func() { waiting = nil }()
	body := `{"capability_id":"slow","invocation_id":"inv-1","correlation_id":"c"}`
	results := make(chan map[string]any, 2)
	post := func() {
		resp, err := http.Post(srv.URL+"/invoke", "application/json", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			results <- nil
			return
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		results <- out
	}
	go post()
	<-entered // the first attempt is at the owner
	go post()
	select {
	case <-waited: // the retry waits at the gateway
	case <-entered:
		t.Error("the concurrent retry reached the owner")
		release <- struct{}{}
	}
	close(release)
	replayed := 0
	for range 2 {
		if r := <-results; r["replayed"] == true {
			replayed++
		}
	}
	if replayed != 1 || execs.Load() != 1 {
		t.Errorf("%d replayed, %d executions; want 1 and 1", replayed, execs.Load())
	}
}
