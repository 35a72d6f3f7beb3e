package descriptor

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// NodeLease is the expires_at a fleet node gives a local registration that
// another node admitted: it has no expiry of its own and lives as long as
// the lease of the node that admitted it.
var NodeLease = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// HeldByNode reports whether expiresAt is NodeLease (or later): the
// registration lives with its node, not until a time.
func HeldByNode(expiresAt time.Time) bool { return !expiresAt.Before(NodeLease) }

// Time is an RFC-005 timestamp: an instant together with the UTC offset it
// was written with, because the signed bytes keep a non-zero offset as
// written ("+02:00" stays "+02:00"). Precision is microseconds, like
// Python's datetime; finer digits are truncated.
type Time struct {
	t time.Time // in a fixed zone carrying the original offset
}

// ErrNaiveTimestamp is returned for a timestamp without a UTC offset. The
// reference accepts it at parse time and then crashes (HTTP 500) comparing
// it with an aware datetime; capmesh refuses it up front.
var ErrNaiveTimestamp = errors.New("timestamp has no UTC offset (naive); write Z or ±HH:MM")

// TimeOf returns t as an RFC-005 Time in UTC, truncated to microseconds.
func TimeOf(t time.Time) Time {
	return Time{t: t.UTC().Truncate(time.Microsecond)}
}

// ParseTime parses an RFC 3339 timestamp with an explicit offset:
// YYYY-MM-DD"T"HH:MM:SS[.fraction](Z|±HH:MM). "t" and "z" are accepted in
// lower case, as RFC 3339 allows. Anything else — a naive time, a space
// separator, "+0000", a missing seconds field — is an error.
func ParseTime(s string) (Time, error) {
	bad := func(why string) (Time, error) {
		return Time{}, fmt.Errorf("timestamp %q: %s", s, why)
	}
	if len(s) < 19 {
		return bad("want YYYY-MM-DDTHH:MM:SS with Z or ±HH:MM")
	}
	num := func(i, n int) (int, bool) {
		v := 0
		for _, c := range []byte(s[i : i+n]) {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	year, ok1 := num(0, 4)
	month, ok2 := num(5, 2)
	day, ok3 := num(8, 2)
	hour, ok4 := num(11, 2)
	minute, ok5 := num(14, 2)
	sec, ok6 := num(17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || s[4] != '-' || s[7] != '-' || s[13] != ':' || s[16] != ':' {
		return bad("want YYYY-MM-DDTHH:MM:SS with Z or ±HH:MM")
	}
	if s[10] != 'T' && s[10] != 't' {
		return bad("date and time must be separated by T")
	}
	rest := s[19:]
	nanos := 0
	if len(rest) > 0 && rest[0] == '.' {
		j := 1
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		if j == 1 {
			return bad("empty fractional seconds")
		}
		frac := rest[1:j]
		// Keep microseconds, truncate the rest (as pydantic does).
		micro := 0
		for k := 0; k < 6; k++ {
			micro *= 10
			if k < len(frac) {
				micro += int(frac[k] - '0')
			}
		}
		nanos = micro * 1000
		rest = rest[j:]
	}
	var offset int
	switch {
	case rest == "":
		return Time{}, fmt.Errorf("timestamp %q: %w", s, ErrNaiveTimestamp)
	case rest == "Z" || rest == "z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, e1 := strconv.Atoi(rest[1:3])
		om, e2 := strconv.Atoi(rest[4:6])
		if e1 != nil || e2 != nil || oh > 23 || om > 59 || rest[1] == '+' || rest[1] == '-' || rest[4] == '+' || rest[4] == '-' {
			return bad("invalid UTC offset")
		}
		offset = oh*3600 + om*60
		if rest[0] == '-' {
			offset = -offset
		}
	default:
		return bad("want Z or ±HH:MM after the time")
	}
	if year < 1 || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || sec > 59 {
		return bad("field out of range")
	}
	zone := time.UTC
	if offset != 0 {
		zone = time.FixedZone("", offset)
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nanos, zone)
	if t.Day() != day || int(t.Month()) != month {
		return bad("no such date")
	}
	return Time{t: t}, nil
}

// Instant returns the point in time.
func (t Time) Instant() time.Time { return t.t }

// IsZero reports whether t is the zero Time.
func (t Time) IsZero() bool { return t.t.IsZero() }

// String renders t as pydantic's JSON mode does, which is what the
// signature covers: YYYY-MM-DDTHH:MM:SS[.ffffff](Z|±HH:MM).
func (t Time) String() string { return t.render(true) }

// IsoFormat renders t as Python's datetime.isoformat(): like String, but
// UTC is written "+00:00". The reference NA uses it in the POST /agents
// answer.
func (t Time) IsoFormat() string { return t.render(false) }

func (t Time) render(zulu bool) string { return string(t.appendTo(make([]byte, 0, 32), zulu)) }

// appendTo appends the rendering to b without allocating.
func (t Time) appendTo(b []byte, zulu bool) []byte {
	x := t.t
	b = appendInt(b, x.Year(), 4)
	b = append(b, '-')
	b = appendInt(b, int(x.Month()), 2)
	b = append(b, '-')
	b = appendInt(b, x.Day(), 2)
	b = append(b, 'T')
	b = appendInt(b, x.Hour(), 2)
	b = append(b, ':')
	b = appendInt(b, x.Minute(), 2)
	b = append(b, ':')
	b = appendInt(b, x.Second(), 2)
	if us := x.Nanosecond() / 1000; us != 0 {
		b = append(b, '.')
		b = appendInt(b, us, 6)
	}
	_, off := x.Zone()
	if off == 0 {
		if zulu {
			return append(b, 'Z')
		}
		return append(b, "+00:00"...)
	}
	sign := byte('+')
	if off < 0 {
		sign = '-'
		off = -off
	}
	b = append(b, sign)
	b = appendInt(b, off/3600, 2)
	b = append(b, ':')
	return appendInt(b, off%3600/60, 2)
}

func appendInt(b []byte, v, width int) []byte {
	var d [20]byte
	s := strconv.AppendInt(d[:0], int64(v), 10)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

// MarshalJSON writes the pydantic rendering.
func (t Time) MarshalJSON() ([]byte, error) { return json.Marshal(t.String()) }

// UnmarshalJSON parses with ParseTime.
func (t *Time) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("timestamp must be a string: %w", err)
	}
	v, err := ParseTime(s)
	if err != nil {
		return err
	}
	*t = v
	return nil
}
