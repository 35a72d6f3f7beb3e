package postgres

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/capmesh/capmesh/evidence"
)

// chpLike is n records shaped like a CHP event stream of one correlation.
func chpLike(n int, first uint64) []evidence.Record {
	recs := make([]evidence.Record, n)
	prev := ""
	for i := range recs {
		hash := fmt.Sprintf("%064x", 0xabcdef+i*7919)
		recs[i] = evidence.Record{Sequence: first + uint64(2*i), CorrelationID: "corr_1", EventType: "execution_started",
			ContentHash: hash, PrevHash: prev,
			Data: fmt.Appendf(nil, `{"content_hash":%q,"event_type":"execution_started","prev_hash":%q,"sequence":%d}`, hash, prev, i)}
		prev = hash
	}
	return recs
}

// TestBlockRoundTrip: a block decodes to exactly the records encoded —
// bytes, hashes, types, sequences — takes fewer bytes than their data,
// and a body that does not match its row's columns is refused.
func TestBlockRoundTrip(t *testing.T) {
	recs := chpLike(5, 10)
	recs[3].EventType = "not in the data" // a literal, not a ref
	body, err := encodeBlock("", 9, recs, nil, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	raw := 0
	for _, r := range recs {
		raw += len(r.Data)
	}
	if len(body) >= raw {
		t.Errorf("body %d bytes for %d bytes of data", len(body), raw)
	}
	got, err := decodeBlock("corr_1", blockRow{prev: 9, last: 18, body: body})
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if g, w := got[i], recs[i]; g.Sequence != w.Sequence || g.EventType != w.EventType || g.ContentHash != w.ContentHash ||
			g.PrevHash != w.PrevHash || !bytes.Equal(g.Data, w.Data) || g.CorrelationID != w.CorrelationID {
			t.Fatalf("record %d: got %+v, want %+v", i, g, w)
		}
	}
	for _, row := range []blockRow{{prev: 9, last: 17, body: body}, {prev: 9, last: 19, body: body}, {prev: 9, last: 18, body: body[:len(body)-1]}} {
		if _, err := decodeBlock("corr_1", row); !errors.Is(err, errCorrupt) {
			t.Errorf("row (%d, %d], %d bytes: %v, want errCorrupt", row.prev, row.last, len(row.body), err)
		}
	}
	id, data, err := decodeResult(must(encodeResult("inv_1", []byte(`{"invocation_id":"inv_1"}`))))
	if err != nil || id != "inv_1" || string(data) != `{"invocation_id":"inv_1"}` {
		t.Fatalf("result: %q %q %v", id, data, err)
	}
}

// TestBlockCarriesResults: a block with the results of its invocations
// (format 2) decodes to the same records and to each result — id, data,
// time to the microsecond — and a row whose res_at says it carries
// results but whose body has none is refused.
func TestBlockCarriesResults(t *testing.T) {
	recs := chpLike(3, 10)
	at := time.Date(2026, 11, 27, 6, 0, 0, 123456000, time.UTC)
	results := []evidence.Result{
		{InvocationID: "inv_1", At: at.Add(-1500 * time.Microsecond), Data: []byte(`{"invocation_id":"inv_1","n":1}`)},
		{InvocationID: "not in the data", At: at, Data: []byte(`{"n":2}`)},
	}
	body := must(encodeBlock("", 9, recs, results, at))
	if body[0] != formatV3 {
		t.Fatalf("format %d, want %d", body[0], formatV3)
	}
	got, gotRes, err := decodeBody("corr_1", blockRow{prev: 9, last: 14, body: body, resAt: at})
	if err != nil || len(got) != 3 || !bytes.Equal(got[2].Data, recs[2].Data) || got[2].PrevHash != recs[1].ContentHash {
		t.Fatalf("records: %+v %v", got, err)
	}
	for i, w := range results {
		if g := gotRes[i]; g.InvocationID != w.InvocationID || !g.At.Equal(w.At) || !bytes.Equal(g.Data, w.Data) {
			t.Errorf("result %d: got %+v, want %+v", i, g, w)
		}
	}
	v1 := must(encodeBlock("", 9, recs, nil, time.Time{}))
	if _, _, err := decodeBody("corr_1", blockRow{prev: 9, last: 14, body: v1, resAt: at}); !errors.Is(err, errCorrupt) {
		t.Errorf("res_at on a block without results: %v, want errCorrupt", err)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// FuzzDecodeBlock: any body, against any columns, decodes to records
// that match the columns, or to errCorrupt; never a panic.
func FuzzDecodeBlock(f *testing.F) {
	f.Add(must(encodeBlock("", 9, chpLike(3, 10), nil, time.Time{})), uint64(9), uint64(14))
	f.Add(must(encodeBlock("", 9, chpLike(3, 10), []evidence.Result{{InvocationID: "i", At: time.Unix(5, 0), Data: []byte(`{"i":1}`)}}, time.Unix(6, 0))), uint64(9), uint64(14))
	f.Add(must(encodeResult("i", []byte("{}"))), uint64(0), uint64(1))
	f.Add([]byte{formatV1}, uint64(0), uint64(1))
	f.Add([]byte{formatV3}, uint64(0), uint64(1))
	for _, name := range []string{"format1-block.bin", "format2-block.bin", "format1-result.bin"} {
		if b, err := os.ReadFile("testdata/" + name); err == nil {
			f.Add(b, uint64(9), uint64(14))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, prev, last uint64) {
		recs, results, err := decodeBody("c", blockRow{prev: prev, last: last, body: body, resAt: time.Unix(1e9, 0)})
		if err != nil {
			if !errors.Is(err, errCorrupt) {
				t.Fatalf("error %v is not errCorrupt", err)
			}
			return
		}
		seq := prev
		for _, r := range recs {
			if r.Sequence <= seq || r.Sequence > last {
				t.Fatalf("sequence %d outside (%d, %d] or not ascending", r.Sequence, prev, last)
			}
			seq = r.Sequence
		}
		if seq != last {
			t.Fatalf("last record %d, row says %d", seq, last)
		}
		for _, r := range results {
			if r.InvocationID == "" || r.At.After(time.Unix(1e9, 0)) {
				t.Fatalf("result %+v: no id, or after the row's res_at", r)
			}
		}
		_, _, _ = decodeResult(body)
	})
}

// TestDecodeBlockClaimIsNotBelieved: a body whose header claims millions
// of records but holds none is refused without allocating for the claim.
func TestDecodeBlockClaimIsNotBelieved(t *testing.T) {
	raw := make([]byte, 8<<20) // zeros: the first record's sequence step is 0, refused at once
	binary.PutUvarint(raw, uint64(len(raw)/5))
	body := must(compress(nil, raw))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := decodeBlock("c", blockRow{prev: 0, last: 1, body: body})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, errCorrupt) {
		t.Fatalf("decode: %v, want errCorrupt", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Errorf("decoding allocated %d MiB for a claim of %d records", got>>20, len(raw)/5)
	}
}
