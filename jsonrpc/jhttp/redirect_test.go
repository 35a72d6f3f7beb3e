package jhttp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestClientNeverFollowsRedirect: a Client made without an http.Client
// answers a redirect with its status as the error and never re-posts the
// call to the address the server names.
func TestClientNeverFollowsRedirect(t *testing.T) {
	var hits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":"redirected"}`))
	}))
	defer target.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := NewClient(srv.URL, nil)
	defer c.Close()
	var got string
	err := c.Call(ctx, "ping", nil, &got)
	if err == nil || !strings.Contains(err.Error(), "HTTP 307") {
		t.Errorf("call answered %q, %v; want an HTTP 307 error", got, err)
	}
	if err := c.Notify(ctx, "ping", nil); err == nil {
		t.Error("a notification answered 307 succeeded")
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the redirect's target was called %d time(s)", n)
	}
}
