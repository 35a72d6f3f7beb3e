package chp

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/capmesh/capmesh/evidence"
)

func TestWorkers(t *testing.T) {
	b, err := NewBoundary(Config{HostID: "w", Store: evidence.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	for id, h := range map[string]Handler{
		"wait": func(context.Context, json.RawMessage) (json.RawMessage, error) {
			<-gate
			return json.RawMessage(`1`), nil
		},
		"panic": func(context.Context, json.RawMessage) (json.RawMessage, error) { panic("handler") },
	} {
		if err := b.Register(Capability{Descriptor: CapabilityDescriptor{ID: id, Version: "1", Description: id}, Handler: h}); err != nil {
			t.Fatal(err)
		}
	}
	// Concurrent invocations that wait for each other all run: a worker is
	// never shared by two at once.
	const n = 32
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := b.invokeOnWorker(context.Background(), &InvocationEnvelope{CapabilityID: "wait"})
			if err != nil || !res.Success {
				t.Errorf("%v %+v", err, res)
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	close(gate)
	wg.Wait()
	// A handler panic is a failure outcome, as on the caller's goroutine.
	if res, err := b.invokeOnWorker(context.Background(), &InvocationEnvelope{CapabilityID: "panic"}); err != nil || res.Error == nil || res.Error.Type != "panic" {
		t.Errorf("panicking handler: %v %+v", err, res)
	}
	// A panic of Invoke itself reaches the caller.
	func() {
		defer func() {
			if p := recover(); p == nil {
				t.Error("panic not re-raised in the caller")
			}
		}()
		var nilBoundary *Boundary
		_, _ = nilBoundary.invokeOnWorker(context.Background(), &InvocationEnvelope{CapabilityID: "wait"})
	}()
	// Idle workers go away.
	deadline := time.Now().Add(5 * time.Second)
	for liveWorkers.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d workers still alive after idling", liveWorkers.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
