package jsonrpc

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestLimitsDocMatchesDefaults checks the defaults column of
// docs/limits.md against the option accessors, row by field name.
func TestLimitsDocMatchesDefaults(t *testing.T) {
	doc, err := os.ReadFile("../docs/limits.md")
	if err != nil {
		t.Fatal(err)
	}
	o := (*ServerOptions)(nil).withDefaults()
	size := func(n int) string { return fmt.Sprintf("%d MiB", n>>20) }
	dur := func(d time.Duration) string {
		if d%time.Minute == 0 {
			return fmt.Sprintf("%d min", d/time.Minute)
		}
		return fmt.Sprintf("%d s", d/time.Second)
	}
	want := map[string]string{
		"MaxConns":        fmt.Sprint(o.MaxConns),
		"OwnerReserve":    fmt.Sprint(64),
		"MaxMessageBytes": size(o.MaxMessageBytes),
		"LineTimeout":     dur(o.LineTimeout),
		"HeaderTimeout":   dur(o.HeaderTimeout),
		"IdleTimeout":     dur(o.IdleTimeout),
		"MaxInFlight":     fmt.Sprint(o.MaxInFlight),
		"MaxBatch":        fmt.Sprint(o.MaxBatch),
		"MaxReplyBytes":   size(o.MaxReplyBytes),
		"WriteTimeout":    dur(o.WriteTimeout),
		"DrainTimeout":    dur(o.DrainTimeout),
	}
	if r := (&ServerOptions{MaxConns: 1 << 20}).withDefaults().OwnerReserve; r != 64 {
		t.Fatalf("default owner reserve %d", r)
	}
	found := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 6 {
			continue
		}
		field := strings.Trim(strings.TrimSpace(cells[4]), "`")
		w, ok := want[field]
		if !ok {
			continue
		}
		found[field] = true
		if def := strings.TrimSpace(cells[2]); !strings.HasPrefix(def, w) {
			t.Errorf("docs/limits.md: %s default %q, the code says %s", field, def, w)
		}
	}
	for f := range want {
		if !found[f] {
			t.Errorf("docs/limits.md has no row for %s", f)
		}
	}
}
