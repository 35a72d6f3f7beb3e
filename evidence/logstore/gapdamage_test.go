package logstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/storetest"
)

// framesOf scans data, which must verify throughout, into its frames
// (items copied).
func framesOf(t *testing.T, data []byte) []frame {
	t.Helper()
	var frames []frame
	res, err := scanLog(bytes.NewReader(data), int64(len(data)), func(fr *frame) error {
		c := *fr
		c.raw = nil
		c.items = append([]item(nil), fr.items...)
		frames = append(frames, c)
		return nil
	})
	if err != nil || len(res.damaged) > 0 || res.tail != nil {
		t.Fatalf("the log does not scan cleanly: %v %+v", err, res)
	}
	return frames
}

// resultsLog writes n records over three correlations, uncompressed, with
// a result after every every-th record, and returns the store directory
// and the log's bytes up to the end of the data.
func resultsLog(t *testing.T, n, every int) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, &Options{Logger: quiet, Uncompressed: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range n {
		recs, err := s.Append(ctx, storetest.Event(fmt.Sprint("c", i%3), "e", fmt.Sprintf("body-%03d", i)))
		if err == nil && i%every == every-1 {
			err = s.PutResult(ctx, evidence.Result{InvocationID: fmt.Sprint("inv-", i), At: time.Unix(int64(i+1), 0), Data: []byte("{}")})
		}
		if err == nil {
			err = s.Sync(ctx, recs[0].Sequence)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	end := s.end
	s.Close()
	data, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	return dir, data[:end]
}

// TestDamagedGapRecordKeepsWhatVerifies: a log with a gap record (an
// earlier Repair licensed a jump of the sequence), then exactly the gap
// record's bytes damaged. Check reports that one record as the only
// damage and Repair moves only its bytes aside, keeping every record and
// result after it, however far the gap had made the sequence jump and
// whatever follows the gap record: many records (the search bounded by
// the damaged bytes' length reaches one of them far on), records then a
// result (the search finds the result), a result first, or blocks of
// records in either compressed format. Before, the search stopped at the
// first frame its bounds accepted and every record before it (and the
// first record after a result found that way) was reported damaged and
// moved aside with the gap record.
func TestDamagedGapRecordKeepsWhatVerifies(t *testing.T) {
	cases := []struct {
		name string
		log  func(t *testing.T) (dir string, gapped []byte)
	}{
		{"many records after the gap", func(t *testing.T) (string, []byte) {
			dir, data, _ := smallLog(t, 300)
			frames := framesOf(t, data)                            // record 1, a result, records 2–300
			return dir, repairedCut(t, dir, data, frames, 51, 195) // 1–50, 195–300
		}},
		{"records then a result", func(t *testing.T) (string, []byte) {
			dir, data := resultsLog(t, 100, 5)
			frames := framesOf(t, data)                            // 5 records, a result, 5 records, …
			return dir, repairedCut(t, dir, data, frames, 24, 103) // 1–20, 87–100
		}},
		{"a result first", func(t *testing.T) (string, []byte) {
			dir, data := resultsLog(t, 100, 5)
			frames := framesOf(t, data)
			if frames[101].items[0].kind != kindResult || frames[102].items[0].rec.Sequence != 86 {
				t.Fatal("frames 101 and 102 are not the result after record 85 and record 86")
			}
			// Repair writes a gap record right before the record after the
			// jump; a gap then a result is as valid.
			gapped := append(append([]byte(nil), data[:frames[24].off]...), appendGap(nil, 86, time.Now(), "sequences 21-85 missing")...)
			return dir, append(gapped, data[frames[101].off:]...) // 1–20, gap, result, 86–100
		}},
		{"blocks", func(t *testing.T) (string, []byte) {
			dir, data, frames := blockLog(t, 200, appendBlock)
			return dir, repairedCut(t, dir, data, frames, 10, 40) // 1–30, 121–600
		}},
		{"blocks-v2", func(t *testing.T) (string, []byte) {
			dir, data, frames := blockLog(t, 200, appendZstdBlock)
			return dir, repairedCut(t, dir, data, frames, 10, 40)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, gapped := c.log(t)
			damagedGapRecord(t, dir, gapped)
		})
	}
}

// repairedCut writes data without its frames [from, to) (records removed
// whole) as the log of dir, repairs it (Repair writes a gap record) and
// returns the repaired log.
func repairedCut(t *testing.T, dir string, data []byte, frames []frame, from, to int) []byte {
	t.Helper()
	path := filepath.Join(dir, FileName)
	cut := append(append([]byte(nil), data[:frames[from].off]...), data[frames[to].off:]...)
	if err := os.WriteFile(path, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	if r, err := Repair(dir, nil); err != nil || !r.Repaired || len(r.Preserved) != 0 {
		t.Fatalf("first Repair = %v, %+v", err, r)
	}
	repaired, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return repaired
}

// damagedGapRecord writes data, a log that verifies with one gap record,
// as the log of dir, damages one byte of the gap record, and checks that
// Check reports exactly the gap record's bytes as damaged and that Repair
// moves only them aside and keeps every other record and result.
func damagedGapRecord(t *testing.T, dir string, data []byte) {
	t.Helper()
	path := filepath.Join(dir, FileName)
	frames := framesOf(t, data)
	g := slices.IndexFunc(frames, func(fr frame) bool { return len(fr.items) == 1 && fr.items[0].kind == kindGap })
	if g < 0 {
		t.Fatal("the repaired log has no gap record")
	}
	gr := frames[g]
	want := itemsBut(frames, g)
	var wantSeqs []uint64
	for _, it := range want {
		if it.kind == kindRecord {
			wantSeqs = append(wantSeqs, it.rec.Sequence)
		}
	}
	after := wantSeqs[slices.IndexFunc(wantSeqs, func(seq uint64) bool { return seq >= gr.items[0].next })-1]
	data[gr.off+gr.size-3] ^= 0x20 // in the gap record's note
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, &Options{Logger: quiet}); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Open with a damaged gap record: %v", err)
	}

	r, err := Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	if moved := intactIn(frames, g, r.Damaged); len(moved) > 0 {
		t.Errorf("Check reports records that verify as damaged: %v", moved)
	}
	if len(r.Damaged) != 1 || r.Damaged[0].Offset != gr.off || r.Damaged[0].Length != gr.size || r.Tail != nil ||
		r.Records != len(wantSeqs) || r.LastSequence != wantSeqs[len(wantSeqs)-1] {
		t.Errorf("Check: damaged runs %s, %d records, last %d, tail %+v; want only the gap record's %d bytes at %d, %d records, last %d",
			runs(r.Damaged), r.Records, r.LastSequence, r.Tail, gr.size, gr.off, len(wantSeqs), wantSeqs[len(wantSeqs)-1])
	}
	if d := r.Damaged[0]; d.After != after || d.Next != frames[g].items[0].next {
		t.Errorf("damage %+v, want sequences %d-%d lost", d, after+1, frames[g].items[0].next-1)
	}

	rr, err := Repair(dir, nil)
	if err != nil || !rr.Repaired || len(rr.Preserved) == 0 {
		t.Fatalf("second Repair = %v, %+v", err, rr)
	}
	if kept, err := os.ReadFile(rr.Preserved[0]); err != nil || len(rr.Preserved) != 1 || !bytes.Equal(kept, data[gr.off:gr.off+gr.size]) {
		t.Errorf("moved aside %d bytes to %d file(s) (%v), want the damaged gap record's %d to one", len(kept), len(rr.Preserved), err, gr.size)
	}
	repairedData, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	results, gaps := 0, 0
	for _, fr := range framesOf(t, repairedData) {
		for _, it := range fr.items {
			switch it.kind {
			case kindRecord:
				got = append(got, it.rec.Sequence)
			case kindResult:
				results++
			case kindGap:
				gaps++
			}
		}
	}
	wantResults := 0
	for _, it := range want {
		if it.kind == kindResult {
			wantResults++
		}
	}
	if !slices.Equal(got, wantSeqs) || results != wantResults || gaps != 1 {
		t.Fatalf("after the second Repair: %d records, %d results, %d gaps, want %d, %d, 1; records that verify moved aside: %v",
			len(got), results, gaps, len(wantSeqs), wantResults, missing(wantSeqs, got))
	}
	s, err := Open(dir, &Options{Logger: quiet})
	if err != nil {
		t.Fatalf("Open after the second Repair: %v", err)
	}
	defer s.Close()
	if last := s.LastSequence(); last != wantSeqs[len(wantSeqs)-1] {
		t.Fatalf("LastSequence %d, want %d", last, wantSeqs[len(wantSeqs)-1])
	}
	if recs, err := s.Append(context.Background(), storetest.Event("z", "e", "after")); err != nil || recs[0].Sequence != wantSeqs[len(wantSeqs)-1]+1 {
		t.Fatalf("Append after the second Repair: %v", err)
	}
}

// intactIn lists the sequences of the records of frames (but the k-th)
// that lie in the damaged runs.
func intactIn(frames []frame, k int, damaged []Damage) []uint64 {
	var out []uint64
	for i, fr := range frames {
		for _, d := range damaged {
			if i != k && fr.off < d.Offset+d.Length && fr.off+fr.size > d.Offset {
				for _, it := range fr.items {
					if it.kind == kindRecord {
						out = append(out, it.rec.Sequence)
					}
				}
			}
		}
	}
	return out
}

// runs describes damaged runs briefly.
func runs(damaged []Damage) string {
	var b strings.Builder
	for _, d := range damaged {
		fmt.Fprintf(&b, "[%d+%d: %s] ", d.Offset, d.Length, d.Reason)
	}
	return b.String()
}

// missing lists the sequences of want not in got.
func missing(want, got []uint64) []uint64 {
	var out []uint64
	for _, s := range want {
		if !slices.Contains(got, s) {
			out = append(out, s)
		}
	}
	return out
}

// TestDamagedGapRecordTakesNoFalseRecord: the search after a damaged gap
// record accepts only what the log's order allows. Random bytes after the
// damaged gap record are damage with it (the records after them are
// kept), and with nothing that verifies after them a torn tail, as
// before; a verifying record whose sequence is above the first one that
// follows (a stray copy of a later record in the damaged bytes) is not
// taken for the place the log resumes: sequences only grow, so the
// records between the damage and the first sequence the bounded search
// finds must have sequences below it.
func TestDamagedGapRecordTakesNoFalseRecord(t *testing.T) {
	dir, data, offs := smallLog(t, 300)
	rng := rand.New(rand.NewPCG(3, 11))
	noise := make([]byte, 64<<10)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	gapRec := appendGap(nil, 195, time.Now(), "repair: sequences 51-194 missing")
	gapRec[len(gapRec)-3] ^= 0x20 // damaged
	stray := data[offs[289]:offs[290]]
	cases := []struct {
		name      string
		filler    []byte
		rest      []byte // from record 195 on
		records   int
		tail      bool
		wantBytes int64 // damaged bytes from the gap record on
	}{
		{"random bytes, then records", noise, data[offs[194]:], 156, false, int64(len(gapRec) + len(noise))},
		{"random bytes, then records, the last one torn", noise, data[offs[194] : len(data)-10], 155, true, int64(len(gapRec) + len(noise))},
		{"random bytes and nothing after", noise, nil, 50, true, 0},
		{"a stray later record, then records", stray, data[offs[194]:], 156, false, int64(len(gapRec) + len(stray))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			log := slices.Concat(data[:offs[50]], gapRec, c.filler, c.rest)
			if err := os.WriteFile(filepath.Join(dir, FileName), log, 0o600); err != nil {
				t.Fatal(err)
			}
			kept, _ := filepath.Glob(filepath.Join(dir, FileName+".*")) // an earlier case's
			for _, p := range kept {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
			r, err := Check(dir)
			if err != nil {
				t.Fatal(err)
			}
			wantRuns := 1
			if c.wantBytes == 0 {
				wantRuns = 0
			}
			if len(r.Damaged) != wantRuns || (wantRuns == 1 && (r.Damaged[0].Offset != offs[50] || r.Damaged[0].Length != c.wantBytes)) ||
				r.Records != c.records || (r.Tail != nil) != c.tail {
				t.Fatalf("Check: damaged runs %s, %d records, tail %+v; want %d damaged bytes at %d, %d records, torn tail %v",
					runs(r.Damaged), r.Records, r.Tail, c.wantBytes, offs[50], c.records, c.tail)
			}
			if c.wantBytes == 0 && r.Tail.Offset != offs[50] {
				t.Fatalf("torn tail %+v, want from %d", r.Tail, offs[50])
			}
			if _, err := Repair(dir, nil); err != nil {
				t.Fatal(err)
			}
			s, err := Open(dir, &Options{Logger: quiet})
			if err != nil {
				t.Fatalf("Open after Repair: %v", err)
			}
			defer s.Close()
			n := 0
			for _, corr := range []string{"c0", "c1", "c2"} {
				recs, err := s.Replay(context.Background(), evidence.Query{CorrelationID: corr})
				if err != nil {
					t.Fatal(err)
				}
				n += len(recs)
			}
			if n != c.records {
				t.Fatalf("%d records served after Repair, want %d", n, c.records)
			}
		})
	}
}

// TestBrokenChainsFirstBreakOnly: Check lists each correlation's first
// missing link only, however many of its records are damaged.
func TestBrokenChainsFirstBreakOnly(t *testing.T) {
	dir, data, offs := smallLog(t, 30)
	for _, i := range []int{15, 21} { // sequences 16 and 22, both of c0
		data[offs[i]+40] ^= 'X'
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), data, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Check(dir)
	if err != nil || len(r.Damaged) != 2 || len(r.Broken) != 1 || r.Broken[0] != (ChainBreak{CorrelationID: "c0", Sequence: 19}) {
		t.Fatalf("Check = %v, damaged %s, broken chains %+v; want two damaged runs, c0 broken from 19 only", err, runs(r.Damaged), r.Broken)
	}
}

// TestDamageRandomPositionsAfterGap: the exactness of
// TestDamageRandomPositions holds in a log that an earlier Repair left
// with a gap record (records removed whole from its middle), in every
// format: one flipped byte in any frame but the last, the gap record
// included, is reported as exactly that frame, and the repaired log holds
// every other record and result. The sequences reported lost run from
// the one expected at the frame to the first one after it, across a gap
// record that follows: damage right before a gap record reports the
// sequences that gap record says were lost too.
func TestDamageRandomPositionsAfterGap(t *testing.T) {
	for _, format := range []struct {
		name         string
		uncompressed bool
		block        func(dst, raw []byte) []byte
	}{{"compressed", false, nil}, {"compressed-v2", false, appendZstdBlock}, {"uncompressed", true, nil}} {
		t.Run(format.name, func(t *testing.T) {
			data, frames := realLog(t, 4, 40, format.uncompressed, format.block)
			cut := slices.Concat(data[:frames[len(frames)/4].off], data[frames[len(frames)/2].off:])
			var gapped bytes.Buffer
			if err := repaired(bytes.NewReader(cut), int64(len(cut)), nil, &gapped); err != nil {
				t.Fatal(err)
			}
			frames = framesOf(t, gapped.Bytes())
			rng := rand.New(rand.NewPCG(7, uint64(len(frames))))
			for trial := range 300 {
				k := rng.IntN(len(frames) - 1)
				if trial == 0 { // the gap record
					k = slices.IndexFunc(frames, func(fr frame) bool { return fr.items[0].kind == kindGap })
				}
				bad := slices.Clone(gapped.Bytes())
				bad[frames[k].off+rng.Int64N(frames[k].size)] ^= byte(1 + rng.IntN(255))
				desc := fmt.Sprintf("trial %d: frame %d of %d", trial, k, len(frames))
				r, err := check(bytes.NewReader(bad), int64(len(bad)), FileName)
				if err != nil {
					t.Fatal(err)
				}
				after, next := sequencesAround(frames, k)
				if len(r.Damaged) != 1 || r.Tail != nil || r.Damaged[0].Offset != frames[k].off || r.Damaged[0].Length != frames[k].size ||
					r.Damaged[0].After != after || r.Damaged[0].Next != next {
					t.Fatalf("%s: damaged runs %s (%+v), tail %+v; want the frame at %d+%d, after %d, next %d",
						desc, runs(r.Damaged), r.Damaged, r.Tail, frames[k].off, frames[k].size, after, next)
				}
				var out bytes.Buffer
				if err := repaired(bytes.NewReader(bad), int64(len(bad)), nil, &out); err != nil {
					t.Fatal(err)
				}
				var got []item
				for _, fr := range framesOf(t, out.Bytes()) {
					got = append(got, fr.items...)
				}
				got = slices.DeleteFunc(got, func(it item) bool { return it.kind == kindGap })
				want := slices.DeleteFunc(itemsBut(frames, k), func(it item) bool { return it.kind == kindGap })
				if !slices.EqualFunc(got, want, func(a, b item) bool {
					return a.kind == b.kind && a.at == b.at && a.rec.Sequence == b.rec.Sequence && a.rec.ContentHash == b.rec.ContentHash
				}) {
					t.Fatalf("%s: the repaired log holds %d items, want %d", desc, len(got), len(want))
				}
			}
		})
	}
}

// sequencesAround returns the last sequence expected before frames[k] (a
// gap record's next, less one, when one precedes it) and the first
// evidence sequence after it (0: none).
func sequencesAround(frames []frame, k int) (after, next uint64) {
	expect := uint64(1)
	for i, fr := range frames {
		for _, it := range fr.items {
			switch {
			case i < k && it.kind == kindRecord:
				expect = it.rec.Sequence + 1
			case i < k && it.kind == kindGap:
				expect = it.next
			case i > k && it.kind == kindRecord:
				return expect - 1, it.rec.Sequence
			}
		}
	}
	return expect - 1, 0
}
