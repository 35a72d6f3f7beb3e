package registrycmd

import (
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry/descriptor"
)

// TestExpiresIn: the table's expiry column is relative within a week,
// a date beyond (a descriptor signed to expire after 2262 used to print
// as the largest time.Duration), and "with its node" for another fleet
// node's local registration.
func TestExpiresIn(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		t    time.Time
		want string
	}{
		{now.Add(90 * time.Second), "in 1m30s"},
		{now.Add(-time.Second), "expired"},
		{now.Add(7 * 24 * time.Hour), "in 168h0m0s"},
		{now.Add(30 * 24 * time.Hour), "on 2026-12-27"},
		{time.Date(3000, 1, 2, 0, 0, 0, 0, time.UTC), "on 3000-01-02"},
		{descriptor.NodeLease, "with its node"},
	} {
		if got := expiresIn(c.t, now); got != c.want {
			t.Errorf("expiresIn(%v) = %q, want %q", c.t, got, c.want)
		}
	}
}
