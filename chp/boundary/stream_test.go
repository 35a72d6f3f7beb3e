package boundary

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary/internal/streamrec"
)

// recordingSink is a ChunkSink that keeps what it is passed.
type recordingSink struct {
	seqs   []int
	deltas []string
}

func (r *recordingSink) sink(seq int, delta json.RawMessage) error {
	r.seqs, r.deltas = append(r.seqs, seq), append(r.deltas, string(delta))
	return nil
}

// events returns the event types and payloads of corr.
func events(t *testing.T, b *Boundary, corr string) (types []string, payloads []json.RawMessage) {
	t.Helper()
	rep, err := b.Replay(context.Background(), chp.ReplayQuery{CorrelationID: corr})
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range rep.Events {
		var e struct {
			EventType string          `json:"event_type"`
			Payload   json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		types, payloads = append(types, e.EventType), append(payloads, e.Payload)
	}
	return types, payloads
}

func streamBoundary(t *testing.T, cfg Config, c Capability) *Boundary {
	t.Helper()
	cfg.HostID = "h"
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Descriptor.Version, c.Descriptor.Description = "1", "x"
	c.Descriptor.Modes = []string{"sync", "stream"}
	if err := b.Register(c); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStreamFailureAfterChunks: a handler failing after its chunks (here:
// its send refused a delta that is not JSON) is a failure result after
// those chunks; execution_failed commits no chunk sequence; a retry
// replays the failure without chunks.
func TestStreamFailureAfterChunks(t *testing.T) {
	b := streamBoundary(t, Config{}, Capability{Descriptor: chp.CapabilityDescriptor{ID: "s.fail"},
		Stream: func(_ context.Context, _ json.RawMessage, send func(json.RawMessage) error) (json.RawMessage, error) {
			if err := send(json.RawMessage(`"ok"`)); err != nil {
				return nil, err
			}
			return nil, send(json.RawMessage(`{"not json`))
		}})
	env := &chp.InvocationEnvelope{CapabilityID: "s.fail", Mode: "stream", InvocationID: "inv-f",
		Correlation: chp.CorrelationContext{CorrelationID: "f"}, Payload: json.RawMessage(`{}`)}
	var got recordingSink
	res, err := b.InvokeStream(context.Background(), env, -1, got.sink)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != chp.OutcomeFailure || len(got.deltas) != 1 || got.deltas[0] != `"ok"` {
		t.Fatalf("result %+v after chunks %v", res, got.deltas)
	}
	types, payloads := events(t, b, "f")
	if last := types[len(types)-1]; last != chp.EventFailed || bytes.Contains(payloads[len(payloads)-1], []byte(chp.ChunkCountKey)) {
		t.Fatalf("events %v, last payload %s", types, payloads[len(payloads)-1])
	}
	var again recordingSink
	env2 := *env
	res, err = b.InvokeStream(context.Background(), &env2, -1, again.sink)
	if err != nil || !res.Replayed || res.Outcome != chp.OutcomeFailure || len(again.deltas) != 0 {
		t.Fatalf("replay: %+v %v chunks %v", res, err, again.deltas)
	}
}

// TestStreamSendAfterTimeout: a handler that ignores its timeout is
// recorded indeterminate; a chunk it sends after the invocation was
// answered is refused and never reaches the sink.
func TestStreamSendAfterTimeout(t *testing.T) {
	release := make(chan struct{})
	late := make(chan error, 1)
	timeout := 0.01
	b := streamBoundary(t, Config{TimeoutGrace: 10 * time.Millisecond}, Capability{
		Descriptor: chp.CapabilityDescriptor{ID: "s.slow", TimeoutS: &timeout},
		Stream: func(_ context.Context, _ json.RawMessage, send func(json.RawMessage) error) (json.RawMessage, error) {
			_ = send(json.RawMessage(`1`))
			<-release // ignores its context
			late <- send(json.RawMessage(`2`))
			return nil, nil
		}})
	env := &chp.InvocationEnvelope{CapabilityID: "s.slow", Mode: "stream", Payload: json.RawMessage(`{}`)}
	var got recordingSink
	res, err := b.InvokeStream(context.Background(), env, -1, got.sink)
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-late; !errors.Is(err, streamrec.ErrEnded) {
		t.Fatalf("late send: %v", err)
	}
	if res.Outcome != chp.OutcomeIndeterminate || len(got.deltas) != 1 {
		t.Fatalf("result %s, chunks %v", res.Outcome, got.deltas)
	}
}
