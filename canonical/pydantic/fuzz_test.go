package pydantic

import (
	"slices"
	"testing"
	"time"
)

// FuzzPydanticTime: the timestamp parser never panics, and what it accepts
// renders to a string that parses back to the same instant and offset.
func FuzzPydanticTime(f *testing.F) {
	for _, s := range []string{"2026-07-01T14:00:00.25+02:00", "2026-07-01T12:30:00.000Z", "2024-02-29t23:59:59.1234567z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := ParseTime(s)
		if err != nil {
			return
		}
		r := Time(tm)
		back, err := ParseTime(r)
		if err != nil {
			t.Fatalf("ParseTime(%q) → %q, which does not parse: %v", s, r, err)
		}
		_, o1 := tm.Zone()
		_, o2 := back.Zone()
		if !back.Equal(tm) || o1 != o2 || Time(back) != r {
			t.Fatalf("%q → %q → %v (offset %d vs %d)", s, r, back.Format(time.RFC3339Nano), o1, o2)
		}
		if tm.Nanosecond()%1000 != 0 {
			t.Fatalf("%q kept sub-microsecond digits: %d ns", s, tm.Nanosecond())
		}
		if slices.Contains([]byte(r), ' ') {
			t.Fatalf("rendering %q has a space", r)
		}
	})
}
