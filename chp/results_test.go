package chp

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
		b, err := NewBoundary(Config{HostID: "restart-host", Store: st, Now: now, ResultWindow: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Register(Capability{Descriptor: CapabilityDescriptor{ID: "kv.put", Version: "1.0.0", Description: "counts"},
			Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) {
				return json.RawMessage(fmt.Sprintf(`{"n":%d}`, calls.Add(1))), nil
			}}); err != nil {
			t.Fatal(err)
		}
		return b, st
	}
	ctx := context.Background()
	invoke := func(b *Boundary, capID, id string) *InvocationResult {
		t.Helper()
		res, err := b.Invoke(ctx, &InvocationEnvelope{CapabilityID: capID, InvocationID: id, Correlation: CorrelationContext{CorrelationID: "c-" + id}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	b, st := start()
	first := invoke(b, "kv.put", "inv-ok")
	denied := invoke(b, "kv.nope", "inv-denied")
	if !first.Success || denied.Outcome != OutcomeDenied || calls.Load() != 1 {
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
		want      *InvocationResult
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
	b, err := NewBoundary(Config{HostID: "dup", Store: evidence.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var calls atomic.Int32
	if err := b.Register(Capability{Descriptor: CapabilityDescriptor{ID: "slow", Version: "1", Description: "x"},
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
			res, err := b.Invoke(context.Background(), &InvocationEnvelope{CapabilityID: "slow", InvocationID: "same"})
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
		_, _ = b.Invoke(context.Background(), &InvocationEnvelope{CapabilityID: "slow", InvocationID: "other"})
	}()
	time.Sleep(10 * time.Millisecond)
	if _, err := b.Invoke(ctx, &InvocationEnvelope{CapabilityID: "slow", InvocationID: "other"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting duplicate: %v, want deadline exceeded", err)
	}
	close(release)
}

// TestResultCacheBounded: the cache holds at most its size; the oldest
// results go first.
func TestResultCacheBounded(t *testing.T) {
	now := time.Now
	c := newResultCache(resultShards*4, time.Hour, now)
	for i := range 1000 {
		id := fmt.Sprint("id", i)
		rec, wait, err := c.claim(id, i%2 == 0)
		if err != nil || rec != nil || wait != nil {
			t.Fatalf("claim %d: %v %v %v", i, rec, wait, err)
		}
		c.settle(id, &InvocationResult{InvocationID: id}, nil, now())
	}
	total := 0
	for i := range c.shards {
		s := &c.shards[i]
		n := 0
		for _, sl := range s.ring {
			if sl.id != "" {
				n++
			}
		}
		if n > 4 || len(s.idx)+len(s.coll) != n || len(s.flying) != 0 {
			t.Errorf("shard %d holds %d results, indexes %d+%d, %d in flight", i, n, len(s.idx), len(s.coll), len(s.flying))
		}
		total += n
	}
	if total > resultShards*4 {
		t.Fatalf("cache holds %d results", total)
	}
	if rec, _, _ := c.claim("id999", false); rec == nil {
		t.Error("newest result evicted")
	}
	if rec, wait, _ := c.claim("id0", false); rec != nil || wait != nil {
		t.Error("oldest result kept")
	}
}

// TestResultCacheCollisions: ids whose 64-bit hashes collide are told apart
// by the id itself, recorded, found and evicted independently.
func TestResultCacheCollisions(t *testing.T) {
	c := newResultCache(resultShards*3, time.Hour, time.Now)
	s := &c.shards[0]
	put := func(id string, h uint64) {
		s.record(resultSlot{id: id, h: h, res: &InvocationResult{InvocationID: id}, at: time.Now().UnixNano()}, c.per)
	}
	put("a", 7)
	put("b", 7) // collides with a
	put("c", 8)
	for _, id := range []string{"a", "b", "c"} {
		h := uint64(7)
		if id == "c" {
			h = 8
		}
		if i, ok := s.find(h, id); !ok || s.ring[i].id != id {
			t.Errorf("%s not found", id)
		}
	}
	if _, ok := s.find(7, "d"); ok {
		t.Error("an unrecorded id with a colliding hash was found")
	}
	put("d", 9) // evicts a: b stays findable through coll
	if _, ok := s.find(7, "a"); ok {
		t.Error("evicted a still found")
	}
	if i, ok := s.find(7, "b"); !ok || s.ring[i].id != "b" {
		t.Error("b lost when a was evicted")
	}
	put("e", 7) // evicts b; e takes the free hash
	if i, ok := s.find(7, "e"); !ok || s.ring[i].id != "e" || len(s.coll) != 0 {
		t.Errorf("e: ok=%v coll=%v", ok, s.coll)
	}
}

// TestGeneratedIDsReplay: an id the host generated is recorded like any
// other — invoking the same envelope again replays it — and while its call
// is in flight, a caller who read the id in the evidence and presents it
// waits for the outcome instead of executing again.
func TestGeneratedIDsReplay(t *testing.T) {
	b, err := NewBoundary(Config{HostID: "gen", Store: evidence.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var calls atomic.Int32
	if err := b.Register(Capability{Descriptor: CapabilityDescriptor{ID: "slow", Version: "1", Description: "x"},
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
	env := &InvocationEnvelope{CapabilityID: "slow"}
	first, err := b.Invoke(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Invoke(ctx, env)
	if err != nil || first.Replayed || !second.Replayed || second.InvocationID != first.InvocationID || calls.Load() != 1 {
		t.Fatalf("same envelope twice: first %+v, second %+v, %d calls", first, second, calls.Load())
	}
	parsed, err := ParseEnvelope([]byte(`{"capability_id":"slow"}`))
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
	done := make(chan *InvocationResult)
	go func() {
		res, _ := b.Invoke(ctx, &InvocationEnvelope{CapabilityID: "slow", Payload: json.RawMessage(`{"wait":true}`),
			Correlation: CorrelationContext{CorrelationID: "inflight"}})
		done <- res
	}()
	var id string
	for deadline := time.Now().Add(5 * time.Second); id == "" && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		rr, err := b.Replay(ctx, ReplayQuery{CorrelationID: "inflight"})
		if err == nil && len(rr.Events) > 0 {
			var ev EvidenceEvent
			_ = json.Unmarshal(rr.Events[0], &ev)
			id = ev.InvocationID
		}
	}
	if id == "" {
		t.Fatal("execution_started never appeared")
	}
	dup := make(chan *InvocationResult)
	go func() {
		res, _ := b.Invoke(ctx, &InvocationEnvelope{CapabilityID: "slow", InvocationID: id, Payload: json.RawMessage(`{"wait":true}`)})
		dup <- res
	}()
	time.Sleep(20 * time.Millisecond)
	close(release)
	orig, again := <-done, <-dup
	if orig == nil || again == nil || orig.Replayed || !again.Replayed || calls.Load() != 1 {
		t.Fatalf("in flight: original %+v, duplicate %+v, %d calls", orig, again, calls.Load())
	}
}

// TestResultCacheChunks: recorded results live in chunks that are reused
// or freed once every result in them is evicted — the cache's memory stays
// bounded by its size, whatever passes through it — and each replay gives
// back exactly the result recorded, large ones (kept on the heap) included.
func TestResultCacheChunks(t *testing.T) {
	c := newResultCache(resultShards*4, time.Hour, time.Now)
	result := func(i int) []byte {
		pad := 200 + i%700
		if i%97 == 0 {
			pad = maxChunk/4 + 1 // larger than a chunk takes
		}
		return fmt.Appendf(nil, `{"capability_id":"x","data":{"n":%d,"pad":%q},"invocation_id":"id%d","outcome":"success","success":true}`,
			i, strings.Repeat("p", pad), i)
	}
	const n = 20000
	for i := range n {
		id := fmt.Sprint("id", i)
		if _, wait, err := c.claim(id, true); err != nil || wait != nil {
			t.Fatal(err)
		}
		c.settle(id, &InvocationResult{InvocationID: id}, result(i), time.Now())
	}
	c.mapped.mu.Lock()
	mapped := len(c.mapped.m)
	c.mapped.mu.Unlock()
	for i := range c.shards {
		s := &c.shards[i]
		live := 0
		for _, ch := range s.chunks {
			live += ch.live
		}
		if len(s.chunks) > 3 || live > 4 {
			t.Errorf("shard %d: %d chunks with %d results", i, len(s.chunks), live)
		}
	}
	if mapped > 4*resultShards {
		t.Errorf("%d chunks mapped for %d results", mapped, resultShards*4)
	}
	found := 0
	for i := n - 200; i < n; i++ {
		rec, _, err := c.claim(fmt.Sprint("id", i), false)
		if err != nil {
			t.Fatal(err)
		}
		if rec == nil {
			continue // evicted: shards are not filled evenly
		}
		found++
		want := map[string]any{}
		_ = json.Unmarshal(result(i), &want)
		var gotData, wantData any
		_ = json.Unmarshal(rec.Data, &gotData)
		wantData = want["data"]
		if rec.InvocationID != fmt.Sprint("id", i) || fmt.Sprint(gotData) != fmt.Sprint(wantData) {
			t.Fatalf("id%d replayed %s, want %v", i, rec.Data, wantData)
		}
	}
	if found < resultShards*2 {
		t.Errorf("only %d of the newest 200 results replay", found)
	}
}
