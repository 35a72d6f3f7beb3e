package chp

import (
	"sync/atomic"
	"time"
)

// TimeFormat is how capmesh writes every CHP timestamp: RFC 3339, UTC, fixed
// microsecond precision.
const TimeFormat = "2006-01-02T15:04:05.000000Z"

// FormatTime renders t in TimeFormat.
func FormatTime(t time.Time) string {
	var b [32]byte
	return string(AppendTime(b[:0], t))
}

// AppendTime appends t in TimeFormat without allocating. The date part of
// the day last rendered is kept (timeDay): most timestamps fall on it, and
// splitting a time into a calendar date is most of the cost.
func AppendTime(dst []byte, t time.Time) []byte {
	sec := t.Unix()
	if sec < 0 || sec >= maxFastTime {
		return t.UTC().AppendFormat(dst, TimeFormat)
	}
	day := sec / 86400
	d := timeDay.Load()
	if d == nil || d.day != day {
		d = &dayPrefix{day: day}
		t.UTC().AppendFormat(d.prefix[:0], "2006-01-02T")
		timeDay.Store(d)
	}
	s := int(sec % 86400)
	hh, mm, ss := s/3600, s/60%60, s%60
	us := t.Nanosecond() / 1000
	dst = append(dst, d.prefix[:]...)
	return append(dst, byte('0'+hh/10), byte('0'+hh%10), ':', byte('0'+mm/10), byte('0'+mm%10), ':',
		byte('0'+ss/10), byte('0'+ss%10), '.',
		byte('0'+us/100000), byte('0'+us/10000%10), byte('0'+us/1000%10),
		byte('0'+us/100%10), byte('0'+us/10%10), byte('0'+us%10), 'Z')
}

// dayPrefix is the rendered date ("2006-01-02T") of a day since the Unix
// epoch.
type dayPrefix struct {
	day    int64
	prefix [11]byte
}

var timeDay atomic.Pointer[dayPrefix]

// maxFastTime is 10000-01-01T00:00:00Z: later years need more digits.
const maxFastTime = 253402300800
