package packed

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
)

// records returns version 1 records (header, CRC-32C, body) of bodies.
func records(bodies ...string) []byte {
	var raw []byte
	for _, b := range bodies {
		raw = binary.BigEndian.AppendUint32(raw, uint32(len(b)))
		raw = binary.BigEndian.AppendUint32(raw, crc32.Checksum([]byte(b), crc32.MakeTable(crc32.Castagnoli)))
		raw = append(raw, b...)
	}
	return raw
}

var bodies = []string{
	`{"hash":"` + strings.Repeat("0123456789abcdef", 4) + `"}`,
	"",
	"\x01\x02 escaped bytes and " + strings.Repeat("ab", 100),
	strings.Repeat("x", 300),
}

// TestRoundTrip: packed records are smaller than hex-heavy records,
// unpack whole to exactly them, and each one reads alone (walking on from
// the previous one) as its version 1 encoding.
func TestRoundTrip(t *testing.T) {
	raw := records(bodies...)
	p := Append(nil, raw)
	if len(p) >= len(raw) || len(p) > MaxLen(len(raw)) {
		t.Fatalf("%d raw bytes packed to %d", len(raw), len(p))
	}
	got, err := Unpack(nil, p, len(raw))
	if err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("Unpack: %v, %q", err, got)
	}
	at, q, off := 0, 0, int64(0)
	for _, b := range bodies {
		size := uint32(8 + len(b))
		var rec []byte
		rec, q, off, err = Record(nil, p, q, off, int64(at), size)
		if err != nil || !bytes.Equal(rec, raw[at:at+int(size)]) {
			t.Fatalf("record at %d: %v, %q", at, err, rec)
		}
		at += int(size)
	}
	if _, _, _, err := Record(nil, p, 0, 0, 3, 10); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a record between records: %v", err)
	}
}

// TestCorrupt: packed records that disagree with their headers or the
// block's raw length, or whose bodies do not unpack, fail with
// ErrCorrupt, and unpacking never writes past a record's length.
func TestCorrupt(t *testing.T) {
	raw := records(bodies...)
	p := Append(nil, raw)
	for name, c := range map[string]struct {
		p []byte
		n int
	}{
		"raw length short":  {p, len(raw) - 1},
		"raw length long":   {p, len(raw) + 1},
		"truncated":         {p[:len(p)-1], len(raw)},
		"packed length lie": {append(append(append([]byte(nil), p[:8]...), 0xff, 0xff, 0x03), p[9:]...), len(raw)},
		"cut in a record":   {Append(nil, records(strings.Repeat("ab", 20)))[:8+1+20], 8 + 40},
	} {
		_, err := Unpack(nil, c.p, c.n)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A body that unpacks to more than its header says: the header of a
	// 30-byte body before a run of 40 digits.
	one := Append(nil, records(strings.Repeat("ab", 20)))
	binary.BigEndian.PutUint32(one, 30)
	if got, err := Unpack(make([]byte, 0, 64), one, 8+30); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "more than 30") {
		t.Fatalf("a body longer than its header: %v, %q", err, got)
	}
}
