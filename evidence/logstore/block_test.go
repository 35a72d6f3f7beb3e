package logstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/logstore/internal/packed"
	"github.com/capmesh/capmesh/evidence/storetest"
	"github.com/klauspost/compress/zstd"
)

// The version 2 writer (zstd), kept for the tests of version 2 logs.
var (
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false))
		if err != nil {
			panic(err)
		}
		return e
	})
	zstdDictEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false),
			zstd.WithEncoderDictRaw(dictV1, dictionaryV1))
		if err != nil {
			panic(err)
		}
		return e
	})
)

// appendZstdBlock appends to dst a version 2 block frame holding raw, as
// the version 2 writer did: with dictionary 1 under 16 KiB.
func appendZstdBlock(dst, raw []byte) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, headerSize)...)
	dst = binary.BigEndian.AppendUint64(dst, 0)
	enc, dict := zstdEncoder(), byte(dictNone)
	if len(raw) < 16<<10 {
		enc, dict = zstdDictEncoder(), dictV1
	}
	dst = append(dst, blockKind, dict)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(raw)))
	dst = enc.EncodeAll(raw, dst)
	seal(dst[start:])
	return dst
}

// someRecords returns n records in their version 1 encoding (as Append
// buffers them; uncompressed, nothing is compressed ahead of a commit).
func someRecords(t testing.TB, n int) []byte {
	s, err := Open(t.TempDir(), &Options{NoSync: true, Logger: quiet, Uncompressed: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range n {
		if _, err := s.Append(context.Background(), storetest.Event(fmt.Sprint("c", i%2), "e", fmt.Sprint("data-", i))); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.pend...)
}

// TestBlockBounds: a record too large for a block is written as itself;
// blocks close at blockTarget and are written in format version 3 with
// dictionary 3, and give back exactly their records; a block header
// claiming more than maxBlockRaw, or an S2 block claiming more than
// twice the raw length, is refused before anything is allocated for it.
func TestBlockBounds(t *testing.T) {
	raw := someRecords(t, 400)
	big := appendGap(nil, 7, time.Unix(1, 0), string(make([]byte, maxBlockRaw)))     // any record will do
	mid := appendGap(nil, 7, time.Unix(1, 0), string(make([]byte, blockTarget+100))) // a block of its own
	first := raw[:headerSize+binary.BigEndian.Uint32(raw)]
	all := append(append(append(append([]byte(nil), raw...), mid...), big...), first...)
	var frames []struct{ rawLen, n int }
	out := compress(nil, all, appendBlock, func(rawOff, rawLen, off, n int, block bool) {
		if block != (rawLen != len(big)) || (block && rawLen > blockTarget+len(mid)) {
			t.Errorf("frame at %d: block %v, %d raw bytes", rawOff, block, rawLen)
		}
		frames = append(frames, struct{ rawLen, n int }{rawLen, n})
	})
	var got []byte
	for p := 0; p < len(out); {
		n := headerSize + int(binary.BigEndian.Uint32(out[p:]))
		body := out[p+headerSize : p+n]
		if isBlock(body) {
			if body[9] != codecS2 {
				t.Errorf("block at %d: codec %d", p, body[9])
			}
			r, err := decodeBlock(body)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, r...)
		} else {
			got = append(got, out[p:p+n]...)
		}
		p += n
	}
	if !bytes.Equal(got, all) || len(frames) < 3 {
		t.Fatalf("%d frames do not give the records back", len(frames))
	}
	// A block of one record near the bound: S2 dictionaries reach 64 KiB
	// back, its records go on past that.
	hexNote := strings.Repeat("0123456789abcdef", (maxBlockRaw-200)/32) + strings.Repeat("x", (maxBlockRaw-200)/2)
	large := appendGap(nil, 7, time.Unix(1, 0), hexNote)
	if r, err := decodeBlock(appendBlock(nil, large)[headerSize:]); err != nil || !bytes.Equal(r, large) {
		t.Fatalf("a block of %d raw bytes does not give its record back: %v", len(large), err)
	}
	hostile := appendBlock(nil, first)[headerSize:]
	binary.BigEndian.PutUint32(hostile[10:], maxBlockRaw+1)
	claims := appendBlock(nil, first)[headerSize:] // an S2 length claiming 1 MiB
	_, w := binary.Uvarint(claims[blockHeader:])
	claims = append(append(claims[:blockHeader:blockHeader], binary.AppendUvarint(nil, 1<<20)...), claims[blockHeader+w:]...)
	for name, b := range map[string][]byte{"raw length": hostile, "S2 length": claims} {
		if _, err := decodeBlock(b); err == nil {
			t.Fatalf("a block whose %s is over the bound decoded", name)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 10 {
			_, _ = decodeBlock(b)
		}
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
			t.Errorf("refusing a hostile %s 10 times allocated %d bytes", name, n)
		}
	}
}

// FuzzDecodeBlock: whatever a block body holds (its frame checksum
// verified: a crafted block), in either format, decoding neither panics
// nor allocates more than maxBlockRaw for the records (twice that for
// packed ones), and what decodes is what the header says; a read of each
// record of a packed block (which unpacks that record alone) gives back
// exactly the bytes the whole block decodes to; the scanner's block
// parser reports it as verifying or not, never a panic.
func FuzzDecodeBlock(f *testing.F) {
	raw := someRecords(f, 20)
	first := raw[:headerSize+binary.BigEndian.Uint32(raw)]
	good := appendBlock(nil, raw)[headerSize:]
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(appendBlock(nil, first)[headerSize:])
	reserved := append([]byte(nil), good...)
	reserved[9] = 2 // between version 2's codecs and version 3's
	f.Add(reserved)
	f.Add(appendZstdBlock(nil, raw)[headerSize:])
	f.Add(appendZstdBlock(nil, first)[headerSize:])
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := decodeBlock(body)
		if err == nil {
			if len(out) > maxBlockRaw || len(out) != int(binary.BigEndian.Uint32(body[10:])) {
				t.Fatalf("decoded %d bytes", len(out))
			}
			records(out, func(int, []byte, string) bool { return true })
			if isPacked(body) {
				readsAsDecoded(t, body, out)
			}
		}
		rec := append(make([]byte, headerSize), body...)
		seal(rec)
		sc := &scanner{r: bytes.NewReader(rec), total: int64(len(rec))}
		fr, why, err := sc.parse(0, 1, true, maxSequence)
		if err != nil {
			t.Fatal(err)
		}
		if why == "" && isBlock(body) && len(fr.items) == 0 {
			t.Fatal("a block that verifies with no records")
		}
	})
}

// readsAsDecoded checks that reading each record of the packed block body
// (decoded whole to raw) as a replay does gives its bytes in raw.
func readsAsDecoded(t *testing.T, body, raw []byte) {
	pk, err := decodePacked(nil, body, len(raw))
	if err != nil {
		t.Fatalf("the block decodes, its packed records do not: %v", err)
	}
	p, off := 0, int64(0)
	for at := 0; at+headerSize <= len(raw); {
		n := uint32(headerSize + binary.BigEndian.Uint32(raw[at:]))
		var rec []byte
		rec, p, off, err = packed.Record(nil, pk, p, off, int64(at), n)
		if err != nil || !bytes.Equal(rec, raw[at:at+int(n)]) {
			t.Fatalf("record at %d reads as %q (%v), decodes as %q", at, rec, err, raw[at:at+int(n)])
		}
		at += int(n)
	}
}

// TestBlockClosesAfterResult: a block closes after a result record once
// it holds blockMin raw bytes (an invocation's events and its result
// share a block), not after a result before that, and at blockTarget
// wherever it is.
func TestBlockClosesAfterResult(t *testing.T) {
	s, err := Open(t.TempDir(), &Options{NoSync: true, Logger: quiet, Uncompressed: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	body := strings.Repeat("e", 900)
	var resultEnds []int
	put := func(i int) {
		if err := s.PutResult(ctx, evidence.Result{InvocationID: fmt.Sprint("inv-", i), At: time.Unix(1, 0), Data: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		resultEnds = append(resultEnds, len(s.pend))
		s.mu.Unlock()
	}
	for i := range 20 {
		if _, err := s.Append(ctx, storetest.Event("c", "e", body)); err != nil {
			t.Fatal(err)
		}
		if i == 1 || i == 5 { // under blockMin, then past it
			put(i)
		}
	}
	s.mu.Lock()
	raw := append([]byte(nil), s.pend...)
	s.mu.Unlock()
	var lens []int
	compress(nil, raw, appendBlock, func(_, rawLen, _, _ int, _ bool) { lens = append(lens, rawLen) })
	if resultEnds[0] >= blockMin || resultEnds[1] < blockMin || resultEnds[1] >= blockTarget {
		t.Fatalf("results end at %v: not the case under test", resultEnds)
	}
	if len(lens) < 2 || lens[0] != resultEnds[1] || lens[1] < blockTarget {
		t.Fatalf("blocks of %v raw bytes, want the first to end after the second result (%d), the next at %d", lens, resultEnds[1], blockTarget)
	}
}
