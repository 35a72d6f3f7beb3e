package etcd

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/registry"
)

// TestFraming: a record's expiry and machine come back as written; a
// record without a machine is framed as before machines were recorded
// (8 bytes of expiry, then the value), so every other record reads the
// same on older nodes; a machine identity too long for its length byte
// is refused.
func TestFraming(t *testing.T) {
	exp := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, r := range []registry.Record{
		{Value: []byte(`{"a":1}`)},
		{Value: []byte(`{"a":1}`), ExpiresAt: exp},
		{Value: []byte(`{"a":1}`), ExpiresAt: exp, Machine: "0123456789abcdef0123456789abcdef"},
		{Value: nil, Machine: "m"},
		{Value: []byte("x"), Machine: strings.Repeat("m", maxMachine)},
	} {
		v, err := encode(r)
		if err != nil {
			t.Fatalf("encode %+v: %v", r, err)
		}
		got, ok := decode([]byte(v))
		if !ok || !bytes.Equal(got.Value, r.Value) || !got.ExpiresAt.Equal(r.ExpiresAt) || got.Machine != r.Machine {
			t.Errorf("round trip of %+v: %+v, %v", r, got, ok)
		}
		if r.Machine == "" {
			want := make([]byte, 8)
			if !r.ExpiresAt.IsZero() {
				binary.BigEndian.PutUint64(want, uint64(r.ExpiresAt.UnixNano()))
			}
			if v != string(append(want, r.Value...)) {
				t.Errorf("%+v is framed %x, not as before", r, v)
			}
		}
	}
	if _, err := encode(registry.Record{Machine: strings.Repeat("m", maxMachine+1)}); err == nil {
		t.Error("a machine identity of 256 bytes was framed")
	}
	old := time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC)
	v, _ := encode(registry.Record{Value: []byte("x"), ExpiresAt: old})
	if got, ok := decode([]byte(v)); !ok || got.Machine != "" || !got.ExpiresAt.Before(time.Unix(1, 0)) {
		t.Errorf("an expiry before 1970 reads back as %+v, %v", got, ok)
	}
	for _, bad := range []string{"", "1234567", "\x80\x00\x00\x00\x00\x00\x00\x00", "\x80\x00\x00\x00\x00\x00\x00\x00\x00x", "\x80\x00\x00\x00\x00\x00\x00\x00\x05ab"} {
		if r, ok := decode([]byte(bad)); ok {
			t.Errorf("decode(%q) = %+v, want unreadable", bad, r)
		}
	}
}

// FuzzDecode: decode never panics, and what it reads encodes to bytes
// that read back the same.
func FuzzDecode(f *testing.F) {
	for _, r := range []registry.Record{{Value: []byte("v")}, {Value: []byte("v"), ExpiresAt: time.Unix(1e9, 5), Machine: "m1"}} {
		v, _ := encode(r)
		f.Add([]byte(v))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		r, ok := decode(v)
		if !ok {
			return
		}
		back, err := encode(r)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", r, err)
		}
		r2, ok := decode([]byte(back))
		if !ok || !bytes.Equal(r2.Value, r.Value) || r2.Machine != r.Machine || !r2.ExpiresAt.Equal(r.ExpiresAt) {
			t.Fatalf("%x decodes to %+v, which encodes to %x, which decodes to %+v", v, r, back, r2)
		}
	})
}

// TestFramingClampsFarExpiry: an expiry past what the header holds (the
// year 2262, where Unix nanoseconds overflow) is stored as the latest it
// holds, so the record reads back live for centuries instead of expired
// in 1970; an earlier one reads back exactly.
func TestFramingClampsFarExpiry(t *testing.T) {
	for _, y := range []int{2200, 2262, 2263, 2300, 3000, 9999} {
		exp := time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC)
		for _, machine := range []string{"", "m1"} {
			v, err := encode(registry.Record{Value: []byte(`{"a":1}`), ExpiresAt: exp, Machine: machine})
			if err != nil {
				t.Fatal(err)
			}
			got, ok := decode([]byte(v))
			want := exp
			if exp.After(maxExpiry) {
				want = maxExpiry
			}
			if !ok || !got.ExpiresAt.Equal(want) || got.Machine != machine {
				t.Errorf("expiry %d (machine %q) reads back %v, %q, %v; want %v", y, machine, got.ExpiresAt, got.Machine, ok, want)
			}
		}
	}
	if maxExpiry.Year() != 2262 {
		t.Errorf("maxExpiry = %v", maxExpiry)
	}
}
