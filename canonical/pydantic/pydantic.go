package pydantic

import (
	"fmt"
	"strconv"
	"time"
)

// Time renders t the way pydantic v2 writes an aware datetime in
// JSON mode, which is what Genesis-Mesh signs:
//
//	YYYY-MM-DDTHH:MM:SS[.ffffff](Z|±HH:MM)
//
// The fraction appears only when the microsecond is non-zero, and then with
// exactly six digits (nanoseconds are truncated, not rounded). A zero offset
// is "Z"; any other offset is kept as t carries it, not converted to UTC
// ("+02:00" stays "+02:00"). An offset with seconds, which RFC 3339 cannot
// express, is written ±HH:MM:SS as Python's isoformat does. Years outside
// 0001..9999 are not representable in the reference; ParseTime never
// returns one.
func Time(t time.Time) string {
	return string(AppendTime(make([]byte, 0, 32), t))
}

// AppendTime appends Time(t) to b.
func AppendTime(b []byte, t time.Time) []byte {
	year, month, day := t.Date()
	hour, minute, sec := t.Clock()
	b = appendPad(b, year, 4)
	b = append(b, '-')
	b = appendPad(b, int(month), 2)
	b = append(b, '-')
	b = appendPad(b, day, 2)
	b = append(b, 'T')
	b = appendPad(b, hour, 2)
	b = append(b, ':')
	b = appendPad(b, minute, 2)
	b = append(b, ':')
	b = appendPad(b, sec, 2)
	if us := t.Nanosecond() / 1000; us != 0 {
		b = append(b, '.')
		b = appendPad(b, us, 6)
	}
	_, off := t.Zone()
	if off == 0 {
		return append(b, 'Z')
	}
	if off < 0 {
		b = append(b, '-')
		off = -off
	} else {
		b = append(b, '+')
	}
	b = appendPad(b, off/3600, 2)
	b = append(b, ':')
	b = appendPad(b, off/60%60, 2)
	if s := off % 60; s != 0 {
		b = append(b, ':')
		b = appendPad(b, s, 2)
	}
	return b
}

func appendPad(b []byte, n, width int) []byte {
	if n < 0 {
		b = append(b, '-')
		n = -n
	}
	var tmp [20]byte
	s := strconv.AppendInt(tmp[:0], int64(n), 10)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

// ParseTime parses an RFC 3339 date-time with an explicit offset, the
// timestamps Genesis-Mesh peers put on the wire, and returns it with its
// offset preserved (UTC for "Z" and zero offsets), so that Time
// renders exactly what the reference signs:
//
//	"2026-07-01T14:00:00.25+02:00" → 2026-07-01T14:00:00.250000+02:00
//	"2026-07-01T12:30:00.000Z"     → 2026-07-01T12:30:00Z
//
// Accepted: "T" or "t" between date and time, "Z" or "z", fractions of any
// length (digits beyond microseconds are truncated, as pydantic does), years
// 0001..9999. Rejected, with an error that says why: a missing offset (a
// naive time, which crashes the reference registry), leap second 60 (Python
// datetimes cannot hold it), and the looser spellings the reference also
// takes (a space separator, "+0000", no seconds, Unix numbers) — see
// docs/DECISIONS.md.
func ParseTime(s string) (time.Time, error) {
	fail := func(why string) (time.Time, error) {
		return time.Time{}, fmt.Errorf("timestamp %q: %s", s, why)
	}
	// YYYY-MM-DDTHH:MM:SS
	if len(s) < 19 {
		return fail("too short for an RFC 3339 date-time (YYYY-MM-DDTHH:MM:SS±HH:MM)")
	}
	year, ok1 := digits(s[0:4])
	month, ok2 := digits(s[5:7])
	day, ok3 := digits(s[8:10])
	hour, ok4 := digits(s[11:13])
	minute, ok5 := digits(s[14:16])
	sec, ok6 := digits(s[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || s[4] != '-' || s[7] != '-' || s[13] != ':' || s[16] != ':' {
		return fail("want YYYY-MM-DDTHH:MM:SS")
	}
	if s[10] != 'T' && s[10] != 't' {
		return fail(fmt.Sprintf("want 'T' between date and time, got %q", s[10]))
	}
	switch {
	case year < 1:
		return fail("year 0000 is out of range")
	case month < 1 || month > 12:
		return fail("month out of range")
	case day < 1 || day > daysIn(month, year):
		return fail("day out of range")
	case hour > 23:
		return fail("hour out of range")
	case minute > 59:
		return fail("minute out of range")
	case sec > 59:
		return fail("second out of range (leap seconds are not representable)")
	}
	i := 19
	nsec := 0
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		scale := 100_000_000
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			if scale >= 1000 { // keep microseconds, truncate the rest
				nsec += int(s[i]-'0') * scale
			}
			scale /= 10
			i++
		}
		if i == start {
			return fail("want digits after '.'")
		}
	}
	if i >= len(s) {
		return fail("no UTC offset (naive timestamps are ambiguous; add Z or ±HH:MM)")
	}
	var loc *time.Location
	switch c := s[i]; c {
	case 'Z', 'z':
		i++
		loc = time.UTC
	case '+', '-':
		if len(s)-i < 6 || s[i+3] != ':' {
			return fail("want the offset as ±HH:MM")
		}
		oh, ok1 := digits(s[i+1 : i+3])
		om, ok2 := digits(s[i+4 : i+6])
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return fail("invalid offset")
		}
		off := oh*3600 + om*60
		if c == '-' {
			off = -off
		}
		i += 6
		if off == 0 {
			loc = time.UTC
		} else {
			loc = time.FixedZone("", off)
		}
	default:
		return fail(fmt.Sprintf("unexpected %q where the UTC offset should be", c))
	}
	if i != len(s) {
		return fail("trailing characters after the offset")
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, nsec, loc), nil
}

func digits(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
