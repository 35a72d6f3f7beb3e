package pydantic

import (
	"strings"
	"testing"
	"time"
)

func TestPydanticTimeRoundTrip(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		// RFC-005-NOTES §2.2 examples (sample 04).
		{"2026-07-01T14:00:00.25+02:00", "2026-07-01T14:00:00.250000+02:00"},
		{"2026-07-01T12:30:00.000Z", "2026-07-01T12:30:00Z"},
		// What the reference signer emits: UTC with microseconds.
		{"2026-06-30T10:11:12.345678Z", "2026-06-30T10:11:12.345678Z"},
		// Zero offsets in any spelling are Z.
		{"2026-07-01T12:00:00+00:00", "2026-07-01T12:00:00Z"},
		{"2026-07-01T12:00:00-00:00", "2026-07-01T12:00:00Z"},
		{"2026-07-01t12:00:00z", "2026-07-01T12:00:00Z"},
		// Non-zero offsets are kept, not converted to UTC.
		{"2026-07-01T12:00:00-05:30", "2026-07-01T12:00:00-05:30"},
		{"2026-07-01T00:00:00+23:59", "2026-07-01T00:00:00+23:59"},
		// Fractions: padded to six digits, truncated (not rounded) beyond.
		{"2026-07-01T12:00:00.5Z", "2026-07-01T12:00:00.500000Z"},
		{"2026-07-01T12:00:00.123456789Z", "2026-07-01T12:00:00.123456Z"},
		{"2026-07-01T12:00:00.9999999Z", "2026-07-01T12:00:00.999999Z"},
		{"2026-07-01T12:00:00.0000001Z", "2026-07-01T12:00:00Z"},
		{"2024-02-29T23:59:59Z", "2024-02-29T23:59:59Z"},
		{"0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z"},
		{"9999-12-31T23:59:59.999999Z", "9999-12-31T23:59:59.999999Z"},
	} {
		tm, err := ParseTime(tc.in)
		if err != nil {
			t.Errorf("ParseTime(%q): %v", tc.in, err)
			continue
		}
		if got := Time(tm); got != tc.want {
			t.Errorf("Time(ParseTime(%q)) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParsePydanticTimeRejects(t *testing.T) {
	for _, tc := range []struct{ in, why string }{
		{"2026-07-01T12:00:00", "no UTC offset"},
		{"2026-07-01T12:00:00.5", "no UTC offset"},
		{"2026-07-01 12:00:00Z", "want 'T'"},
		{"2026-07-01T12:00Z", "too short"},
		{"2026-07-01T12:00:00+0200", "±HH:MM"},
		{"2026-07-01T12:00:00+02", "±HH:MM"},
		{"1782907200", "too short"},
		{"2026-07-01T12:00:60Z", "leap seconds"},
		{"2026-13-01T12:00:00Z", "month"},
		{"2026-00-01T12:00:00Z", "month"},
		{"2023-02-29T12:00:00Z", "day"},
		{"2026-04-31T12:00:00Z", "day"},
		{"2026-07-01T24:00:00Z", "hour"},
		{"2026-07-01T12:60:00Z", "minute"},
		{"0000-01-01T00:00:00Z", "year"},
		{"2026-07-01T12:00:00.Z", "digits after '.'"},
		{"2026-07-01T12:00:00+24:00", "invalid offset"},
		{"2026-07-01T12:00:00ZZ", "trailing"},
		{"2026-07-01T12:00:00Z ", "trailing"},
		{"２026-07-01T12:00:00Z", "want YYYY"},
		{"2026/07/01T12:00:00Z", "want YYYY"},
	} {
		_, err := ParseTime(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("ParseTime(%q) = %v, want an error mentioning %q", tc.in, err, tc.why)
		}
	}
}

func TestPydanticTimeOfGoTimes(t *testing.T) {
	for _, tc := range []struct {
		t    time.Time
		want string
	}{
		{time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC), "2026-07-01T12:00:00Z"},
		{time.Date(2026, 7, 1, 12, 0, 0, 999, time.UTC), "2026-07-01T12:00:00Z"},
		{time.Date(2026, 7, 1, 12, 0, 0, 1000, time.UTC), "2026-07-01T12:00:00.000001Z"},
		{time.Date(2026, 7, 1, 12, 0, 0, 0, time.FixedZone("CEST", 2*3600)), "2026-07-01T12:00:00+02:00"},
		{time.Date(2026, 7, 1, 12, 0, 0, 0, time.FixedZone("", -(9*3600+30*60))), "2026-07-01T12:00:00-09:30"},
		{time.Date(2026, 7, 1, 12, 0, 0, 0, time.FixedZone("", 3600+30*60+15)), "2026-07-01T12:00:00+01:30:15"},
		{time.Date(33, 1, 2, 3, 4, 5, 0, time.UTC), "0033-01-02T03:04:05Z"},
	} {
		if got := Time(tc.t); got != tc.want {
			t.Errorf("Time(%v) = %q, want %q", tc.t, got, tc.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { AppendTime(make([]byte, 0, 40), time.Now()) }); n > 1 {
		t.Errorf("AppendTime allocates %.0f times", n)
	}
}
