package evidence_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/storetest"
)

func TestMemoryStore(t *testing.T) {
	storetest.Run(t, func(*testing.T) evidence.Store { return evidence.NewMemory() })
}

// TestMemoryStoreCollisions runs the suite with every correlation id hashing
// to the same index key: chains must still be told apart by their ids.
func TestMemoryStoreCollisions(t *testing.T) {
	storetest.Run(t, func(*testing.T) evidence.Store { return evidence.NewCollidingMemory() })
}

// TestMemoryReleasesArenas: Close gives the arenas back at once; a store
// dropped without Close gives them back once it is collected.
func TestMemoryReleasesArenas(t *testing.T) {
	ctx := context.Background()
	fill := func(m *evidence.Memory) {
		for i := range 200 {
			if _, err := m.Append(ctx, storetest.Event(fmt.Sprint("c", i%7), "e", strings.Repeat("x", 1000))); err != nil {
				t.Fatal(err)
			}
		}
	}
	settle := func(want int64) int64 {
		var got int64
		for range 50 {
			runtime.GC()
			time.Sleep(10 * time.Millisecond)
			if got = evidence.MappedBytes(); got <= want {
				break
			}
		}
		return got
	}
	base := settle(0)
	m := evidence.NewMemory()
	fill(m)
	if runtime.GOOS == "linux" && evidence.MappedBytes() <= base {
		t.Fatalf("no arena mapped outside the heap (%d bytes)", evidence.MappedBytes())
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := settle(base); got > base {
		t.Errorf("after Close %d bytes still mapped, want %d", got, base)
	}
	for range 20 {
		fill(evidence.NewMemory()) // dropped without Close
	}
	if got := settle(base); got > base {
		t.Errorf("dropped stores left %d bytes mapped, want %d", got, base)
	}
}
