package streamrec

import (
	"encoding/json"
	"testing"
	"time"
)

// TestStreamCacheBounds: recorded chunk logs expire with the result
// window and are dropped oldest first beyond the cap.
func TestStreamCacheBounds(t *testing.T) {
	var c Cache
	t0 := time.Unix(1000, 0)
	d := []json.RawMessage{json.RawMessage(`"x"`)}
	c.Put("a", d, t0, time.Hour, 2)
	c.Put("b", d, t0, time.Hour, 2)
	c.Put("c", d, t0, time.Hour, 2)
	if c.Get("a", t0, time.Hour) != nil || c.Get("c", t0, time.Hour) == nil {
		t.Fatal("the oldest log was not dropped at the cap")
	}
	if c.Get("b", t0.Add(2*time.Hour), time.Hour) != nil {
		t.Fatal("an expired log was replayed")
	}
	c.Put("d", d, t0.Add(2*time.Hour), time.Hour, 2)
	if len(c.m) != 1 || c.bytes != 3 {
		t.Fatalf("expired logs kept: %d logs, %d bytes", len(c.m), c.bytes)
	}
}
