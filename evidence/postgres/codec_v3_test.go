package postgres

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/internal/hexpack"
)

// TestDictsFrozen: the dictionaries evidence was compressed with are the
// committed bytes, unchanged (a new dictionary is a new format byte), and
// format 3's parses.
func TestDictsFrozen(t *testing.T) {
	for _, d := range []struct {
		name, sum string
		b         []byte
	}{
		{"dict-v1.zdict", "998ca457fe1dbfe64d61a124004bfffadaec7758808ed0c46143e380ca44aa35", dictV1},
		{"dict-v3.s2dict", "1f002978875c90c8df16ee34c83f4c88e66915222fcde186a34804014aa6cd95", dictV3Bytes},
	} {
		if sum := sha256.Sum256(d.b); hex.EncodeToString(sum[:]) != d.sum {
			t.Errorf("%s changed: sha256 %x; a new dictionary needs a new body format", d.name, sum)
		}
	}
	if dictV3 == nil {
		t.Fatal("dict-v3.s2dict does not parse")
	}
}

// TestReadsFormats1And2: bodies written before format 3 (zstd with
// dict-v1, committed as written by that code) still read back: records,
// hashes, results.
func TestReadsFormats1And2(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	v1 := read("format1-block.bin")
	recs, err := decodeBlock("corr_1", blockRow{prev: 9, last: 18, body: v1})
	want := chpLike(5, 10)
	if err != nil || v1[0] != formatV1 || len(recs) != 5 {
		t.Fatalf("format 1 block: %d records, %v", len(recs), err)
	}
	for i := range want {
		if g, w := recs[i], want[i]; g.Sequence != w.Sequence || g.ContentHash != w.ContentHash || g.PrevHash != w.PrevHash || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("format 1 record %d: got %+v, want %+v", i, g, w)
		}
	}
	at := time.Date(2026, 11, 27, 6, 0, 0, 123456000, time.UTC)
	v2 := read("format2-block.bin")
	recs, results, err := decodeBody("corr_1", blockRow{prev: 9, last: 14, body: v2, resAt: at})
	if err != nil || v2[0] != formatV2 || len(recs) != 3 || !bytes.Equal(recs[2].Data, chpLike(3, 10)[2].Data) {
		t.Fatalf("format 2 block: %+v %v", recs, err)
	}
	if len(results) != 2 || results[0].InvocationID != "inv_1" || !results[0].At.Equal(at.Add(-1500*time.Microsecond)) ||
		results[1].InvocationID != "not in the data" || string(results[1].Data) != `{"n":2}` {
		t.Fatalf("format 2 results: %+v", results)
	}
	id, data, err := decodeResult(read("format1-result.bin"))
	if err != nil || id != "inv_1" || string(data) != `{"invocation_id":"inv_1"}` {
		t.Fatalf("format 1 result: %q %q %v", id, data, err)
	}
}

// TestFormat3RoundTrip: every body written is format 3 — blocks with and
// without results, lone results, bodies whose bytes need hexpack's
// escapes — and decodes to exactly what was encoded.
func TestFormat3RoundTrip(t *testing.T) {
	recs := chpLike(4, 100)
	recs[1].Data = append([]byte("\x01\x02 binary "), recs[1].Data...)
	at := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	for _, results := range [][]evidence.Result{nil, {{InvocationID: "inv_9", At: at, Data: []byte(`{"invocation_id":"inv_9"}`)}}} {
		body := must(encodeBlock("ff00", 99, recs, results, at))
		if body[0] != formatV3 {
			t.Fatalf("format %d, want %d", body[0], formatV3)
		}
		row := blockRow{prev: 99, last: 106, body: body}
		if results != nil {
			row.resAt = at
		}
		got, gotRes, err := decodeBody("corr_1", row)
		if err != nil || len(got) != 4 || len(gotRes) != len(results) {
			t.Fatalf("decode: %d records, %d results, %v", len(got), len(gotRes), err)
		}
		if got[0].PrevHash != "ff00" || !bytes.Equal(got[1].Data, recs[1].Data) || got[3].ContentHash != recs[3].ContentHash {
			t.Fatalf("records: %+v", got)
		}
	}
	body := must(encodeResult("inv_2", []byte(`{"invocation_id":"inv_2","h":"`+strings.Repeat("0123456789abcdef", 8)+`"}`)))
	if id, data, err := decodeResult(body); body[0] != formatV3 || err != nil || id != "inv_2" || !bytes.Contains(data, []byte("0123456789abcdef\"")) {
		t.Fatalf("result: format %d, %q %q %v", body[0], id, data, err)
	}
}

// TestFormat3Damaged: a format 3 body cut short anywhere, with any byte
// changed, or whose S2 header claims another length, is errCorrupt —
// never a panic, never other bytes.
func TestFormat3Damaged(t *testing.T) {
	at := time.Unix(1e9, 0)
	body := must(encodeBlock("", 9, chpLike(3, 10), []evidence.Result{{InvocationID: "i", At: at, Data: []byte(`{"i":1}`)}}, at))
	row := func(b []byte) blockRow { return blockRow{prev: 9, last: 14, body: b, resAt: at} }
	if _, _, err := decodeBody("c", row(body)); err != nil {
		t.Fatal(err)
	}
	check := func(what string, b []byte) {
		t.Helper()
		if _, _, err := decodeBody("c", row(b)); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: %v, want errCorrupt", what, err)
		}
		if _, _, err := decodeResult(b); !errors.Is(err, errCorrupt) {
			t.Errorf("%s as a result: %v, want errCorrupt", what, err)
		}
	}
	for n := range len(body) {
		check("truncated", body[:n])
	}
	for i := range body {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			b := bytes.Clone(body)
			b[i] ^= x
			check("flipped", b)
		}
	}
	// The S2 header (after the format byte and checksum) is the packed
	// length: any other length is refused.
	n, k := binary.Uvarint(body[5:])
	for _, m := range []uint64{0, n - 1, n + 1, 2 * n, maxBody, maxBody + 1, 1 << 32} {
		b := binary.AppendUvarint(bytes.Clone(body[:5]), m)
		check("length", append(b, body[5+k:]...))
	}
}

// TestFormat3Bounded: reading a format 3 body allocates no more than the
// limit whatever it claims, and a body that unpacks to more is refused;
// writing refuses a body whose packed form exceeds the limit.
func TestFormat3Bounded(t *testing.T) {
	claim := binary.AppendUvarint([]byte{formatV3, 0, 0, 0, 0}, maxBody+1)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := decompress(append(claim, 0, 0, 0))
	runtime.ReadMemStats(&after)
	if !errors.Is(err, errCorrupt) {
		t.Fatalf("claim over maxBody: %v, want errCorrupt", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("a claim of %d bytes allocated %d", maxBody+1, got)
	}
	const limit = 1 << 16
	hexRun := []byte(strings.Repeat("0123456789abcdef", limit/16+1)) // packs to half, unpacks over limit
	body, err := compressUpTo(nil, hexRun, 2*limit)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decompressV3(body[1:], 2*limit); err != nil {
		t.Fatalf("within the limit: %v", err)
	}
	if len(hexpack.Append(nil, hexRun)) > limit {
		t.Fatal("test body packs over the limit")
	}
	if _, err := decompressV3(body[1:], limit); !errors.Is(err, errCorrupt) {
		t.Errorf("unpacking over the limit: %v, want errCorrupt", err)
	}
	escapes := bytes.Repeat([]byte{0x01}, 60) // packs to 120 bytes
	if _, err := compressUpTo(nil, escapes, 100); !errors.Is(err, evidence.ErrInvalid) {
		t.Errorf("packed over the limit: %v, want ErrInvalid", err)
	}
	if _, err := compressUpTo(nil, escapes, 120); err != nil {
		t.Errorf("packed at the limit: %v", err)
	}
}
