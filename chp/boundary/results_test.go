package boundary

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/logstore"
	"github.com/capmesh/capmesh/evidence/sqlite"
)

// TestReplayAcrossRestart: a retried invocation_id is answered from the
// recorded result after the host restarts (chp-v0.2.md §13) — the handler
// does not run again and no event is appended — for a success and a denial
// alike, until the window ends.
func TestReplayAcrossRestart(t *testing.T) {
	for name, open := range map[string]func(dir string) (evidence.Store, error){
		"logstore": func(dir string) (evidence.Store, error) { return logstore.Open(dir, nil) },
		"sqlite":   func(dir string) (evidence.Store, error) { return sqlite.Open(dir, nil) },
	} {
		t.Run(name, func(t *testing.T) { testReplayAcrossRestart(t, open) })
	}
}

func testReplayAcrossRestart(t *testing.T, open func(dir string) (evidence.Store, error)) {
	dir := filepath.Join(t.TempDir(), "ev")
	clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	var calls atomic.Int32
	start := func() (*Boundary, evidence.Store) {
		t.Helper()
		st, err := open(dir)
		if err != nil {
			t.Fatal(err)
		}
		b, err := New(Config{HostID: "restart-host", Store: st, Now: now, ResultWindow: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Register(Capability{Descriptor: chp.CapabilityDescriptor{ID: "kv.put", Version: "1.0.0", Description: "counts"},
			Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) {
				return json.RawMessage(fmt.Sprintf(`{"n":%d}`, calls.Add(1))), nil
			}}); err != nil {
			t.Fatal(err)
		}
		return b, st
	}
	ctx := context.Background()
	invoke := func(b *Boundary, capID, id string) *chp.InvocationResult {
		t.Helper()
		res, err := b.Invoke(ctx, &chp.InvocationEnvelope{CapabilityID: capID, InvocationID: id, Correlation: chp.CorrelationContext{CorrelationID: "c-" + id}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	b, st := start()
	first := invoke(b, "kv.put", "inv-ok")
	denied := invoke(b, "kv.nope", "inv-denied")
	if !first.Success || denied.Outcome != chp.OutcomeDenied || calls.Load() != 1 {
		t.Fatalf("first run: %+v %+v calls=%d", first, denied, calls.Load())
	}
	if again := invoke(b, "kv.put", "inv-ok"); !again.Replayed || string(again.Data) != `{"n":1}` {
		t.Fatalf("replay before restart: %+v", again)
	}
	events := st.LastSequence()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart: a new store handle, a new boundary.
	b, st = start()
	defer st.Close()
	for _, c := range []struct {
		capID, id string
		want      *chp.InvocationResult
	}{{"kv.put", "inv-ok", first}, {"kv.nope", "inv-denied", denied}} {
		got := invoke(b, c.capID, c.id)
		if !got.Replayed {
			t.Fatalf("%s executed again after restart: %+v", c.id, got)
		}
		got.Replayed = false
		a, _ := json.Marshal(got)
		w, _ := json.Marshal(c.want)
		if string(a) != string(w) {
			t.Errorf("%s: replayed result differs:\n got %s\nwant %s", c.id, a, w)
		}
	}
	if calls.Load() != 1 || st.LastSequence() != events {
		t.Fatalf("replay ran the handler (%d calls) or appended events (%d → %d)", calls.Load(), events, st.LastSequence())
	}
	// After the window a duplicate id executes fresh.
	clock = clock.Add(2 * time.Hour)
	if got := invoke(b, "kv.put", "inv-ok"); got.Replayed || calls.Load() != 2 {
		t.Fatalf("expired result replayed: %+v", got)
	}
	// A restart with the clock past the window loads nothing stale.
	st.Close()
	b, st = start()
	defer st.Close()
	if got := invoke(b, "kv.nope", "inv-denied"); got.Replayed {
		t.Fatalf("stale result reloaded: %+v", got)
	}
}

// TestDuplicatesInFlight: concurrent calls with one invocation_id execute
// once; the others wait and replay.
func TestDuplicatesInFlight(t *testing.T) {
	b, err := New(Config{HostID: "dup", Store: evidence.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var calls atomic.Int32
	if err := b.Register(Capability{Descriptor: chp.CapabilityDescriptor{ID: "slow", Version: "1", Description: "x"},
		Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			calls.Add(1)
			<-release
			return json.RawMessage(`true`), nil
		}}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	replayed := atomic.Int32{}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := b.Invoke(context.Background(), &chp.InvocationEnvelope{CapabilityID: "slow", InvocationID: "same"})
			if err != nil || !res.Success {
				t.Errorf("%v %+v", err, res)
				return
			}
			if res.Replayed {
				replayed.Add(1)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	if calls.Load() != 1 || replayed.Load() != 7 {
		t.Fatalf("calls %d, replayed %d; want 1 and 7", calls.Load(), replayed.Load())
	}
	// A waiter gives up with its context.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	release = make(chan struct{})
	go func() {
		_, _ = b.Invoke(context.Background(), &chp.InvocationEnvelope{CapabilityID: "slow", InvocationID: "other"})
	}()
	time.Sleep(10 * time.Millisecond)
	if _, err := b.Invoke(ctx, &chp.InvocationEnvelope{CapabilityID: "slow", InvocationID: "other"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting duplicate: %v, want deadline exceeded", err)
	}
	close(release)
}

// TestGeneratedIDsReplay: an id the host generated is recorded like any
// other — invoking the same envelope again replays it — and while its call
// is in flight, a caller who read the id in the evidence and presents it
// waits for the outcome instead of executing again.
func TestGeneratedIDsReplay(t *testing.T) {
	b, err := New(Config{HostID: "gen", Store: evidence.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var calls atomic.Int32
	if err := b.Register(Capability{Descriptor: chp.CapabilityDescriptor{ID: "slow", Version: "1", Description: "x"},
		Handler: func(_ context.Context, p json.RawMessage) (json.RawMessage, error) {
			calls.Add(1)
			if strings.Contains(string(p), "wait") {
				<-release
			}
			return json.RawMessage(`{"n":1}`), nil
		}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	env := &chp.InvocationEnvelope{CapabilityID: "slow"}
	first, err := b.Invoke(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Invoke(ctx, env)
	if err != nil || first.Replayed || !second.Replayed || second.InvocationID != first.InvocationID || calls.Load() != 1 {
		t.Fatalf("same envelope twice: first %+v, second %+v, %d calls", first, second, calls.Load())
	}
	parsed, err := chp.ParseEnvelope([]byte(`{"capability_id":"slow"}`))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		res, err := b.Invoke(ctx, parsed)
		if err != nil || res.Replayed != (i == 1) {
			t.Fatalf("parsed envelope, call %d: %+v %v", i, res, err)
		}
	}

	// In flight: the id is in the evidence before the handler returns.
	calls.Store(0)
	done := make(chan *chp.InvocationResult)
	go func() {
		res, _ := b.Invoke(ctx, &chp.InvocationEnvelope{CapabilityID: "slow", Payload: json.RawMessage(`{"wait":true}`),
			Correlation: chp.CorrelationContext{CorrelationID: "inflight"}})
		done <- res
	}()
	var id string
	for deadline := time.Now().Add(5 * time.Second); id == "" && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		rr, err := b.Replay(ctx, chp.ReplayQuery{CorrelationID: "inflight"})
		if err == nil && len(rr.Events) > 0 {
			var ev chp.EvidenceEvent
			_ = json.Unmarshal(rr.Events[0], &ev)
			id = ev.InvocationID
		}
	}
	if id == "" {
		t.Fatal("execution_started never appeared")
	}
	dup := make(chan *chp.InvocationResult)
	go func() {
		res, _ := b.Invoke(ctx, &chp.InvocationEnvelope{CapabilityID: "slow", InvocationID: id, Payload: json.RawMessage(`{"wait":true}`)})
		dup <- res
	}()
	time.Sleep(20 * time.Millisecond)
	close(release)
	orig, again := <-done, <-dup
	if orig == nil || again == nil || orig.Replayed || !again.Replayed || calls.Load() != 1 {
		t.Fatalf("in flight: original %+v, duplicate %+v, %d calls", orig, again, calls.Load())
	}
}
