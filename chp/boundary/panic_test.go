package boundary

import (
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/internal/logbuf"
)

// TestHandlerPanicIsOpaque: a handler's panic value goes to the host log
// under an id; the caller and the evidence see a generic internal error
// naming only that id.
func TestHandlerPanicIsOpaque(t *testing.T) {
	const secret = "db-password=hunter2"
	var logs logbuf.Buffer
	store := evidence.NewMemory()
	b, err := New(Config{HostID: "panic-host", Store: store, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Register(Capability{Descriptor: chp.CapabilityDescriptor{ID: "x.boom", Version: "1.0.0", Description: "panics"},
		Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) { panic(secret) }}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := b.Invoke(ctx, &chp.InvocationEnvelope{CapabilityID: "x.boom", Correlation: chp.CorrelationContext{CorrelationID: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != chp.OutcomeFailure || res.Error == nil || res.Error.Type != "internal_error" {
		t.Fatalf("result: %+v %+v", res, res.Error)
	}
	id := regexp.MustCompile(`panic_[0-9a-f]{32}`).FindString(res.Error.Message)
	if id == "" || strings.Contains(res.Error.Message, secret) {
		t.Fatalf("error message %q: want only a panic id", res.Error.Message)
	}
	rep, err := b.Replay(ctx, chp.ReplayQuery{CorrelationID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	all, _ := json.Marshal(rep)
	if strings.Contains(string(all), "hunter2") || !strings.Contains(string(all), id) {
		t.Errorf("evidence carries the panic value or lacks its id %s: %s", id, all)
	}
	l := logs.String()
	if !strings.Contains(l, id) || !strings.Contains(l, secret) {
		t.Errorf("host log lacks the id %s or the panic value: %s", id, l)
	}
}
