package chp

import (
	"testing"
	"time"
)

// TestAppendTime: the cached-day writer agrees with time.Format everywhere,
// across day boundaries, zones and the years it hands to time.Format.
func TestAppendTime(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(2026, 11, 22, 0, 24, 45, 123456789, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("e", -7200)),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Unix(0, 0),
		time.Unix(-1, 999999000),
		time.Date(2026, 11, 22, 23, 59, 59, 999999999, time.FixedZone("w", 3600)),
		time.Date(2026, 11, 23, 0, 0, 0, 1000, time.UTC),
		time.Date(2024, 2, 29, 12, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 22, 0, 24, 45, 123456789, time.UTC), // the cached day again
	} {
		if got, want := string(AppendTime(nil, tm)), tm.UTC().Format(TimeFormat); got != want {
			t.Errorf("%v: %s, want %s", tm, got, want)
		}
	}
}
