package logstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/capmesh/capmesh/evidence/storetest"
)

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
// blocks close at blockTarget, and only those of less than dictBelow use
// the dictionary (a full block does not, the rest of a commit does); a block header claiming more than
// maxBlockRaw is refused before anything is allocated for it.
func TestBlockBounds(t *testing.T) {
	raw := someRecords(t, 400)
	big := appendGap(nil, 7, time.Unix(1, 0), string(make([]byte, maxBlockRaw)))   // any record will do
	mid := appendGap(nil, 7, time.Unix(1, 0), string(make([]byte, dictBelow+100))) // a block of its own, without the dictionary
	first := raw[:headerSize+binary.BigEndian.Uint32(raw)]
	all := append(append(append(append([]byte(nil), raw...), mid...), big...), first...)
	var frames []struct{ rawLen, n int }
	var blockLens []int
	out := compress(nil, all, func(rawOff, rawLen, off, n int, block bool) {
		if block != (rawLen != len(big)) || (block && rawLen > blockTarget+len(mid)) {
			t.Errorf("frame at %d: block %v, %d raw bytes", rawOff, block, rawLen)
		}
		frames = append(frames, struct{ rawLen, n int }{rawLen, n})
		if block {
			blockLens = append(blockLens, rawLen)
		}
	})
	var got []byte
	dicts := map[byte]int{}
	for p := 0; p < len(out); {
		n := headerSize + int(binary.BigEndian.Uint32(out[p:]))
		body := out[p+headerSize : p+n]
		if isBlock(body) {
			if want := byte(dictNone); blockLens[0] < dictBelow && body[9] != dictV1 || blockLens[0] >= dictBelow && body[9] != want {
				t.Errorf("block of %d raw bytes: dictionary %d", blockLens[0], body[9])
			}
			dicts[body[9]]++
			blockLens = blockLens[1:]
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
	if dicts[dictNone] < 2 || dicts[dictV1] < 1 {
		t.Errorf("blocks by dictionary: %v, want full blocks without it and the rest of the records with it", dicts)
	}
	hostile := appendBlock(nil, first)[headerSize:]
	binary.BigEndian.PutUint32(hostile[10:], maxBlockRaw+1)
	if _, err := decodeBlock(hostile); err == nil {
		t.Fatal("a block claiming more than maxBlockRaw decoded")
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		_, _ = decodeBlock(hostile)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Errorf("refusing a hostile header 10 times allocated %d bytes", n)
	}
}

// FuzzDecodeBlock: whatever a block body holds (its frame checksum
// verified: a crafted block), decoding neither panics nor allocates more
// than maxBlockRaw for the records, and what decodes is what the header
// says; the scanner's block parser reports it as verifying or not, never
// a panic.
func FuzzDecodeBlock(f *testing.F) {
	raw := someRecords(f, 20)
	good := appendBlock(nil, raw)[headerSize:]
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(appendBlock(nil, raw[:headerSize+binary.BigEndian.Uint32(raw)])[headerSize:])
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := decodeBlock(body)
		if err == nil {
			if len(out) > maxBlockRaw || len(out) != int(binary.BigEndian.Uint32(body[10:])) {
				t.Fatalf("decoded %d bytes", len(out))
			}
			records(out, func(int, []byte, string) bool { return true })
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
