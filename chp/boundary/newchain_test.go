package boundary

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/evidence"
)

// hintRecorder is a store that records, per Append, whether each pending
// carried evidence.Pending.NewChain.
type hintRecorder struct {
	evidence.Store
	mu    sync.Mutex
	calls [][]bool
}

func (h *hintRecorder) Append(ctx context.Context, batch ...evidence.Pending) ([]evidence.Record, error) {
	hints := make([]bool, len(batch))
	for i := range batch {
		hints[i] = batch[i].NewChain
	}
	h.mu.Lock()
	h.calls = append(h.calls, hints)
	h.mu.Unlock()
	return h.Store.Append(ctx, batch...)
}

// TestNewChainHint: an invocation whose correlation id the boundary drew
// itself marks every pending of its first append NewChain, and none of a
// later append (the store may have dropped that chain's head from its
// cache by then); an invocation in a correlation the caller named marks
// none.
func TestNewChainHint(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		env     chp.InvocationEnvelope
		appends int
		first   bool
	}{
		{"drawn ids, safety-gated", chp.InvocationEnvelope{CapabilityID: "conformance.echo"}, 2, true},
		{"caller's invocation id, drawn correlation", chp.InvocationEnvelope{CapabilityID: "conformance.echo", InvocationID: chp.NewID("inv")}, 2, true},
		{"denied, drawn ids", chp.InvocationEnvelope{CapabilityID: "conformance.unsafe"}, 1, true},
		{"caller's correlation", chp.InvocationEnvelope{CapabilityID: "conformance.echo",
			Correlation: chp.CorrelationContext{CorrelationID: "corr_given"}}, 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &hintRecorder{Store: evidence.NewMemory()}
			b := fixtureBoundary(t, rec)
			env := c.env
			env.Payload = json.RawMessage(`{"value":1}`)
			if _, err := b.Invoke(ctx, &env); err != nil {
				t.Fatal(err)
			}
			if len(rec.calls) != c.appends {
				t.Fatalf("%d appends, want %d", len(rec.calls), c.appends)
			}
			for i, hints := range rec.calls {
				for _, h := range hints {
					if want := c.first && i == 0; h != want {
						t.Fatalf("append %d: hints %v, want all %v", i, hints, want)
					}
				}
			}
		})
	}
}

// afterRecorder is a store that records, per Append, the
// evidence.Pending.After of each pending and the last sequence appended.
type afterRecorder struct {
	evidence.Store
	mu    sync.Mutex
	after [][]uint64
	last  []uint64
}

func (a *afterRecorder) Append(ctx context.Context, batch ...evidence.Pending) ([]evidence.Record, error) {
	after := make([]uint64, len(batch))
	for i := range batch {
		after[i] = batch[i].After
	}
	recs, err := a.Store.Append(ctx, batch...)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.after = append(a.after, after)
	if err == nil {
		a.last = append(a.last, recs[len(recs)-1].Sequence)
	}
	return recs, err
}

// TestAppendsNameTheirPredecessor: every pending of an invocation's later
// append names the last record of its earlier one (evidence.Pending.After),
// so that a store that lost those records refuses the rest; the first
// append names none.
func TestAppendsNameTheirPredecessor(t *testing.T) {
	ctx := context.Background()
	rec := &afterRecorder{Store: evidence.NewMemory()}
	b := fixtureBoundary(t, rec)
	if _, err := b.Invoke(ctx, &chp.InvocationEnvelope{CapabilityID: "conformance.echo", Payload: json.RawMessage(`{"value":1}`)}); err != nil {
		t.Fatal(err)
	}
	if len(rec.after) != 2 {
		t.Fatalf("%d appends, want 2", len(rec.after))
	}
	for _, a := range rec.after[0] {
		if a != 0 {
			t.Fatalf("first append names %v, want none", rec.after[0])
		}
	}
	for _, a := range rec.after[1] {
		if a != rec.last[0] {
			t.Fatalf("second append names %v, want the first's last record %d", rec.after[1], rec.last[0])
		}
	}
}
