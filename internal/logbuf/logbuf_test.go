package logbuf

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestConcurrentWrites: writers on many goroutines, read meanwhile, lose
// nothing (run under -race).
func TestConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				fmt.Fprintf(&b, "%d.%d\n", i, j)
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 800 {
		t.Fatalf("%d lines, want 800", n)
	}
}
