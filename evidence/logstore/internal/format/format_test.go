package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/evidence"
	"github.com/google/go-cmp/cmp"
)

// TestFramesRoundTrip: records, results and gap records decode to what
// was encoded, their headers hold their length and CRC-32C, and what
// cannot be encoded or decoded is refused.
func TestFramesRoundTrip(t *testing.T) {
	rec := evidence.Record{Sequence: 42, CorrelationID: "corr-1", EventType: "execution_started",
		ContentHash: strings.Repeat("a", 64), PrevHash: strings.Repeat("b", 64), Data: []byte(`{"x":1}`)}
	b, err := AppendRecord([]byte("prefix"), &rec)
	if err != nil {
		t.Fatal(err)
	}
	frame := b[len("prefix"):]
	checkHeader(t, "record", frame)
	if len(frame) != RecordSize(&rec) || IsSpecial(frame[HeaderSize:]) {
		t.Fatalf("record frame of %d bytes, RecordSize %d", len(frame), RecordSize(&rec))
	}
	got, err := DecodeRecord(frame[HeaderSize:])
	if diff := cmp.Diff(rec, got); err != nil || diff != "" {
		t.Fatalf("record decodes with %v, diff (-want +got):\n%s", err, diff)
	}

	res := evidence.Result{InvocationID: "inv-1", At: time.UnixMicro(1_700_000_000_123_456).UTC(), Data: []byte(`{"ok":true}`)}
	frame, err = AppendResult(nil, &res)
	if err != nil {
		t.Fatal(err)
	}
	checkHeader(t, "result", frame)
	gotRes, err := DecodeResult(frame[HeaderSize:])
	if diff := cmp.Diff(res, gotRes); err != nil || diff != "" || !IsSpecial(frame[HeaderSize:]) {
		t.Fatalf("result decodes with %v, diff (-want +got):\n%s", err, diff)
	}

	frame = AppendGap(nil, 7, time.UnixMicro(99), "moved to evidence.log.damaged-10")
	checkHeader(t, "gap", frame)
	g, err := DecodeGap(frame[HeaderSize:])
	if want := (Gap{Next: 7, At: 99, Note: "moved to evidence.log.damaged-10"}); err != nil || g != want {
		t.Fatalf("gap decodes to %+v, %v; want %+v", g, err, want)
	}
	for _, next := range []uint64{0, MaxSequence + 1} {
		if _, err := DecodeGap(AppendGap(nil, next, time.Unix(0, 0), "")[HeaderSize:]); err == nil {
			t.Errorf("a gap record to sequence %d decoded", next)
		}
	}
	long := rec
	long.EventType = strings.Repeat("e", 256)
	if _, err := AppendRecord(nil, &long); !errors.Is(err, evidence.ErrInvalid) {
		t.Errorf("an event type of 256 bytes: %v, want ErrInvalid", err)
	}
}

// checkHeader checks that the frame's header holds its body's length and
// CRC-32C.
func checkHeader(t *testing.T, what string, frame []byte) {
	t.Helper()
	body := frame[HeaderSize:]
	if int(binary.BigEndian.Uint32(frame)) != len(body) || binary.BigEndian.Uint32(frame[4:]) != Checksum(body) {
		t.Fatalf("%s frame: header % x does not hold its length and checksum", what, frame[:HeaderSize])
	}
}

// TestDecodersRefuseTruncatedBodies: every truncation of a record,
// result, gap or block body (each without data or note, so that none is
// whole) is an error, never a panic.
func TestDecodersRefuseTruncatedBodies(t *testing.T) {
	rec := evidence.Record{Sequence: 1, CorrelationID: "c", EventType: "e", ContentHash: "h", PrevHash: "p"}
	r, _ := AppendRecord(nil, &rec)
	res, _ := AppendResult(nil, &evidence.Result{InvocationID: "inv", At: time.Unix(1, 0)})
	gap := AppendGap(nil, 3, time.Unix(1, 0), "")
	block := AppendBlock(nil, someRecords(t, 50))
	for _, c := range []struct {
		name   string
		frame  []byte
		decode func([]byte) error
	}{
		{"record", r, func(b []byte) error { _, err := DecodeRecord(b); return err }},
		{"result", res, func(b []byte) error { _, err := DecodeResult(b); return err }},
		{"gap", gap, func(b []byte) error { _, err := DecodeGap(b); return err }},
		{"block", block, func(b []byte) error { _, err := DecodeBlock(b); return err }},
	} {
		body := c.frame[HeaderSize:]
		if err := c.decode(body); err != nil {
			t.Fatalf("%s: the whole body does not decode: %v", c.name, err)
		}
		for n := range len(body) {
			if c.decode(body[:n:n]) == nil {
				t.Errorf("%s: %d of its %d bytes decoded", c.name, n, len(body))
			}
		}
	}
}

// someRecords returns n evidence records, with a result every 9th, in
// their version 1 encoding, as a store buffers them.
func someRecords(t *testing.T, n int) []byte {
	var raw []byte
	for i := range n {
		var err error
		if i%9 == 8 {
			raw, err = AppendResult(raw, &evidence.Result{InvocationID: fmt.Sprint("inv-", i), At: time.Unix(1, 0), Data: []byte(strings.Repeat("r", 300))})
		} else {
			raw, err = AppendRecord(raw, &evidence.Record{Sequence: uint64(i + 1), CorrelationID: fmt.Sprint("c", i%3), EventType: "e",
				ContentHash: fmt.Sprintf("%064x", i), PrevHash: fmt.Sprintf("%064x", i+1), Data: []byte(fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("d", i%200)))})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return raw
}

// TestCompressAndBlockCut: the frames Compress makes give back exactly
// the records they were made of, each block's records verifying, and
// BlockCut is where the full blocks end: compressing up to it makes the
// same blocks.
func TestCompressAndBlockCut(t *testing.T) {
	raw := someRecords(t, 400)
	type placed struct{ rawOff, rawLen, off, n int }
	frames := func(raw []byte) ([]byte, []placed) {
		var ps []placed
		out := Compress(nil, raw, AppendBlock, func(rawOff, rawLen, off, n int, block bool) {
			if !block {
				t.Fatalf("a record of %d bytes written as itself", rawLen)
			}
			ps = append(ps, placed{rawOff, rawLen, off, n})
		})
		return out, ps
	}
	out, ps := frames(raw)
	var got []byte
	for _, p := range ps {
		frame := out[p.off : p.off+p.n]
		checkHeader(t, "block", frame)
		dec, err := DecodeBlock(frame[HeaderSize:])
		if err != nil || !bytes.Equal(dec, raw[p.rawOff:p.rawOff+p.rawLen]) {
			t.Fatalf("block at %d does not give back its records: %v", p.rawOff, err)
		}
		Records(dec, func(off int, rec []byte, why string) bool {
			if why != "" {
				t.Fatalf("record at %d of block at %d: %s", off, p.rawOff, why)
			}
			got = append(got, rec...)
			return true
		})
	}
	if !bytes.Equal(got, raw) || len(ps) < 3 {
		t.Fatalf("%d blocks do not give back the %d bytes of records", len(ps), len(raw))
	}
	cut := BlockCut(raw)
	if cut == 0 || cut == len(raw) {
		t.Fatalf("BlockCut %d of %d bytes: not the case under test", cut, len(raw))
	}
	_, prefix := frames(raw[:cut])
	for i, p := range prefix {
		if p.rawOff != ps[i].rawOff || p.rawLen != ps[i].rawLen {
			t.Fatalf("block %d of the cut: %+v, of the whole: %+v", i, p, ps[i])
		}
	}
	if last := prefix[len(prefix)-1]; last.rawOff+last.rawLen != cut {
		t.Fatalf("the cut's blocks end at %d, BlockCut says %d", last.rawOff+last.rawLen, cut)
	}
	// Where a block closes depends on the records before, so of the
	// records up to any record's end the full blocks end where the
	// blocks of the whole closed (its last one closed by its end only).
	want := 0
	for e := 0; e < len(raw); {
		e += HeaderSize + int(binary.BigEndian.Uint32(raw[e:]))
		for _, p := range ps[:len(ps)-1] {
			if end := p.rawOff + p.rawLen; end <= e {
				want = end
			}
		}
		if got := BlockCut(raw[:e]); got != want {
			t.Fatalf("BlockCut of the records up to %d: %d, want %d", e, got, want)
		}
	}
}
