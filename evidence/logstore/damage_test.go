package logstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/logstore/internal/packed"
	"github.com/capmesh/capmesh/evidence/storetest"
)

var quiet = slog.New(slog.DiscardHandler)

// realLog builds a log through the store API: writers appending
// started/completed pairs to many correlations, recorded results, every
// pair made durable with Sync (group commits, zeros prepared ahead),
// compressed unless uncompressed (in blocks made by block; nil: the
// store's own). It returns the file's bytes up to the end of the data
// plus 4 KiB of the zeros after it, and the frames in file order.
func realLog(t testing.TB, writers, pairs int, uncompressed bool, block func(dst, raw []byte) []byte) ([]byte, []frame) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, &Options{Logger: quiet, Uncompressed: uncompressed})
	if err != nil {
		t.Fatal(err)
	}
	s.block = block
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range pairs {
				corr := fmt.Sprintf("corr-%d", rng.IntN(40))
				body := fmt.Sprintf("w%d-i%d-%s", w, i, strings.Repeat("x", rng.IntN(200)))
				recs, err := s.Append(ctx, storetest.Event(corr, "execution_started", body), storetest.Event(corr, "execution_completed", body))
				if err == nil && i%10 == 0 {
					err = s.PutResult(ctx, evidence.Result{InvocationID: fmt.Sprintf("inv-%d-%d", w, i), At: time.Unix(1700000000+int64(w*100000+i), 0), Data: []byte(`{"ok":true}`)})
				}
				if err == nil {
					err = s.Sync(ctx, recs[1].Sequence)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	end := s.phys
	data, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	data = data[:min(int64(len(data)), end+4096)]
	var frames []frame
	res, err := scanLog(bytes.NewReader(data), int64(len(data)), func(fr *frame) error {
		c := *fr
		c.raw = nil
		c.items = append([]item(nil), fr.items...)
		for i := range c.items {
			c.items[i].rec.Data = append([]byte(nil), c.items[i].rec.Data...)
		}
		frames = append(frames, c)
		return nil
	})
	if err != nil || len(res.damaged) > 0 || res.tail != nil || res.end != end {
		t.Fatalf("the pristine log does not scan cleanly: %v %+v", err, res)
	}
	if blocks := countBlocks(frames); (blocks == 0) != uncompressed {
		t.Fatalf("%d of %d frames are blocks (uncompressed %v)", blocks, len(frames), uncompressed)
	}
	return data, frames
}

func countBlocks(frames []frame) int {
	n := 0
	for _, fr := range frames {
		if fr.block {
			n++
		}
	}
	return n
}

// itemsBut are the items of frames but those of frames[k].
func itemsBut(frames []frame, k int) []item {
	var out []item
	for i, fr := range frames {
		if i != k {
			out = append(out, fr.items...)
		}
	}
	return out
}

// evidenceIn returns the first and last evidence sequence of fr (0, 0:
// none).
func evidenceIn(fr frame) (first, last uint64) {
	for _, it := range fr.items {
		if it.kind == kindRecord {
			if first == 0 {
				first = it.rec.Sequence
			}
			last = it.rec.Sequence
		}
	}
	return first, last
}

// TestDamageRandomPositions flips or zeroes one byte of a real log at
// random positions, one per trial, in every format: compressed blocks
// (version 3, and version 2's zstd blocks) and uncompressed records. Every time the check reports the damage at
// exactly the damaged frame (a block, or a record), and the repaired log
// holds every record and result except that frame's. Damage before the
// last frame makes Open refuse the store (ErrDamaged) and Repair moves
// exactly the damaged frame's bytes aside; damage in the last frame is a
// torn tail that Open cuts and preserves. Every trial is checked in memory
// (the code paths of Check and Repair over the same bytes); every 25th,
// and every torn tail, also through the files: Check, Open, Repair, and
// the reopened store serving each remaining record and result.
func TestDamageRandomPositions(t *testing.T) {
	for _, format := range []struct {
		name         string
		uncompressed bool
		block        func(dst, raw []byte) []byte
	}{{"compressed", false, nil}, {"compressed-v2", false, appendZstdBlock}, {"uncompressed", true, nil}} {
		t.Run(format.name, func(t *testing.T) { damageRandomPositions(t, format.uncompressed, format.block) })
	}
}

func damageRandomPositions(t *testing.T, uncompressed bool, block func(dst, raw []byte) []byte) {
	trials := 1000
	if testing.Short() {
		trials = 100
	}
	data, frames := realLog(t, 4, 40, uncompressed, block)
	end := frames[len(frames)-1].off + frames[len(frames)-1].size
	rng := rand.New(rand.NewPCG(15, 5))
	dir := t.TempDir()
	start := time.Now()
	var refused, torn, onDisk int
	for trial := range trials {
		pos := rng.Int64N(end)
		bad, orig := data, data[pos] // damaged in place, restored below
		if rng.IntN(2) == 0 && bad[pos] != 0 {
			bad[pos] = 0
		} else {
			bad[pos] ^= byte(1 + rng.IntN(255))
		}
		k := 0
		for frames[k].off+frames[k].size <= pos {
			k++
		}
		desc := fmt.Sprintf("trial %d: byte %d (frame %d of %d at %d)", trial, pos, k, len(frames), frames[k].off)
		last := k == len(frames)-1
		if last {
			torn++
		} else {
			refused++
			checkInMemory(t, desc, bad, frames, k)
		}
		if last || trial%25 == 0 {
			checkOnDisk(t, desc, dir, bad, frames, k)
			onDisk++
		}
		data[pos] = orig
	}
	t.Logf("%d trials on a log of %d frames (%d blocks, %d items, %d bytes): %d refused and repaired, %d torn tails, %d through the files; %v",
		trials, len(frames), countBlocks(frames), len(itemsBut(frames, -1)), end, refused, torn, onDisk, time.Since(start).Round(time.Millisecond))
}

// checkOnDisk runs one trial through the files: Check, Open, Repair and
// the reopened store.
func checkOnDisk(t *testing.T, desc, dir string, bad []byte, frames []frame, k int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, FileName), bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if k == len(frames)-1 {
		checkTornTrial(t, desc, dir, frames[k])
	} else {
		checkDamagedTrial(t, desc, dir, bad, frames[k])
	}
	checkServed(t, desc, dir, itemsBut(frames, k))
	kept, _ := filepath.Glob(filepath.Join(dir, FileName+".*"))
	for _, p := range kept {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
}

// checkInMemory checks the report on bad, then repairs it and checks the
// repaired log holds exactly the items but the k-th frame's.
func checkInMemory(t *testing.T, desc string, bad []byte, frames []frame, k int) {
	t.Helper()
	r, err := check(bytes.NewReader(bad), int64(len(bad)), FileName)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, desc, r, frames[k])
	var out bytes.Buffer
	out.Grow(len(bad) + 4096)
	if err := repaired(bytes.NewReader(bad), int64(len(bad)), nil, &out); err != nil {
		t.Fatal(err)
	}
	want := itemsBut(frames, k)
	i, gaps := 0, 0
	res, err := scanLog(bytes.NewReader(out.Bytes()), int64(out.Len()), func(fr *frame) error {
		for _, g := range fr.items {
			if g.kind == kindGap {
				gaps++
				continue
			}
			if i == len(want) {
				return errors.New("more items than the log had")
			}
			w := &want[i]
			if g.kind != w.kind || g.at != w.at || g.rec.Sequence != w.rec.Sequence || g.rec.ContentHash != w.rec.ContentHash || !bytes.Equal(g.rec.Data, w.rec.Data) {
				return fmt.Errorf("item %d differs", i)
			}
			i++
		}
		return nil
	})
	first, _ := evidenceIn(frames[k])
	if err != nil || len(res.damaged) > 0 || res.tail != nil || i != len(want) || (first != 0) != (gaps == 1) {
		t.Fatalf("%s: repaired log: %v, %+v, %d of %d items, %d gaps", desc, err, res, i, len(want), gaps)
	}
}

// checkReport checks that r reports exactly the frame fr as damaged.
func checkReport(t *testing.T, desc string, r *Report, fr frame) {
	t.Helper()
	if len(r.Damaged) != 1 || r.Tail != nil {
		t.Fatalf("%s: report %+v", desc, r)
	}
	d := r.Damaged[0]
	if d.Offset != fr.off || d.Length != fr.size {
		t.Fatalf("%s: damage reported at %d+%d, want the frame at %d+%d", desc, d.Offset, d.Length, fr.off, fr.size)
	}
	if first, last := evidenceIn(fr); first != 0 && (d.After+1 != first || d.Next-1 != last) {
		t.Fatalf("%s: damage reported as sequences %d–%d lost, want %d–%d", desc, d.After+1, d.Next-1, first, last)
	}
}

func checkTornTrial(t *testing.T, desc, dir string, fr frame) {
	t.Helper()
	r, err := Check(dir)
	if err != nil || r.IsDamaged() || r.Tail == nil || r.Tail.Offset != fr.off {
		t.Fatalf("%s: Check = %v, %+v: want a torn tail at %d", desc, err, r, fr.off)
	}
	var logged bytes.Buffer
	s, err := Open(dir, &Options{NoSync: true, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatalf("%s: Open of a torn tail: %v", desc, err)
	}
	s.Close()
	if !strings.Contains(logged.String(), "level=WARN msg=\"evidence log ended in a torn record") {
		t.Fatalf("%s: torn tail not reported: %q", desc, logged.String())
	}
	kept, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%s.torn-%d", FileName, fr.off)))
	if err != nil || len(kept) == 0 || int64(len(kept)) > fr.size {
		t.Fatalf("%s: torn tail not preserved: %v", desc, err)
	}
}

func checkDamagedTrial(t *testing.T, desc, dir string, bad []byte, fr frame) {
	t.Helper()
	r, err := Check(dir)
	if err != nil {
		t.Fatalf("%s: Check: %v", desc, err)
	}
	checkReport(t, desc, r, fr)
	if _, err := Open(dir, &Options{NoSync: true, Logger: quiet}); !errors.Is(err, ErrDamaged) {
		t.Fatalf("%s: Open of a damaged log: %v, want ErrDamaged", desc, err)
	}
	r, err = Repair(dir, &Options{NoSync: true})
	if err != nil || !r.Repaired || len(r.Preserved) != 1 {
		t.Fatalf("%s: Repair = %v, %+v", desc, err, r)
	}
	kept, err := os.ReadFile(r.Preserved[0])
	if err != nil || !bytes.Equal(kept, bad[fr.off:fr.off+fr.size]) {
		t.Fatalf("%s: damaged bytes not preserved in %s: %v", desc, r.Preserved[0], err)
	}
	first, _ := evidenceIn(fr)
	if r, err := Check(dir); err != nil || r.IsDamaged() || r.Tail != nil || (first != 0 && len(r.Gaps) != 1) {
		t.Fatalf("%s: Check after Repair = %v, %+v", desc, err, r)
	}
}

// checkServed opens the store in dir and checks that it serves exactly the
// records and results of items, and takes an append after them.
func checkServed(t *testing.T, desc, dir string, items []item) {
	t.Helper()
	s, err := Open(dir, &Options{NoSync: true, Logger: quiet})
	if err != nil {
		t.Fatalf("%s: Open: %v", desc, err)
	}
	defer s.Close()
	ctx := context.Background()
	byCorr := map[string][]*item{}
	results := map[int64]bool{}
	var last uint64
	for i := range items {
		switch it := &items[i]; it.kind {
		case kindRecord:
			byCorr[it.rec.CorrelationID] = append(byCorr[it.rec.CorrelationID], it)
			last = it.rec.Sequence
		case kindResult:
			results[it.at] = true
		}
	}
	for corr, recs := range byCorr {
		got, err := s.Replay(ctx, evidence.Query{CorrelationID: corr})
		if err != nil || len(got) != len(recs) {
			t.Fatalf("%s: %s: %v, %d records served, want %d", desc, corr, err, len(got), len(recs))
		}
		for i, g := range got {
			w := recs[i].rec
			if g.Sequence != w.Sequence || g.ContentHash != w.ContentHash || g.PrevHash != w.PrevHash || !bytes.Equal(g.Data, w.Data) {
				t.Fatalf("%s: %s: record %d served as %d, want %d", desc, corr, i, g.Sequence, w.Sequence)
			}
		}
	}
	n := 0
	if err := s.Results(ctx, time.Time{}, func(r evidence.Result) bool { n++; return results[r.At.UnixMicro()] }); err != nil || n != len(results) {
		t.Fatalf("%s: %d results served (%v), want %d", desc, n, err, len(results))
	}
	if s.LastSequence() < last {
		t.Fatalf("%s: LastSequence %d, want at least %d", desc, s.LastSequence(), last)
	}
	if recs, err := s.Append(ctx, storetest.Event("after", "e", "x")); err != nil || recs[0].Sequence != s.LastSequence() {
		t.Fatalf("%s: append after recovery: %v", desc, err)
	}
}

// smallLog writes n records over three correlations, with a result after
// the first, uncompressed (format version 1, where logical offsets are
// file offsets), and returns the store directory, the log's bytes up to
// the end of the data and the records' offsets.
func smallLog(t *testing.T, n int) (string, []byte, []int64) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, &Options{Logger: quiet, Uncompressed: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var offs []int64
	for i := range n {
		s.mu.RLock()
		offs = append(offs, s.end)
		s.mu.RUnlock()
		recs, err := s.Append(ctx, storetest.Event(fmt.Sprint("c", i%3), "e", fmt.Sprintf("body-%03d", i)))
		if err == nil && i == 0 {
			err = s.PutResult(ctx, evidence.Result{InvocationID: "inv", At: time.Unix(1, 0), Data: []byte("{}")})
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
	return dir, data[:end], offs
}

// TestFlippedByteMidLog is the case: one flipped byte in the middle
// of the log. The old recovery cut the log there and served half of it;
// now Open refuses the store and leaves the file as it was, Check names the
// damaged record, and after Repair every other record is served, the
// sequence carrying on past the gap across reopens.
func TestFlippedByteMidLog(t *testing.T) {
	dir, _, offs := smallLog(t, 30)
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{'X'}, offs[15]+40); err != nil { // inside sequence 16
		t.Fatal(err)
	}
	f.Close()
	before, _ := os.ReadFile(path)
	_, err = Open(dir, &Options{Logger: quiet})
	var de *DamageError
	if !errors.Is(err, ErrDamaged) || !errors.As(err, &de) || de.Damaged[0].Offset != offs[15] {
		t.Fatalf("Open of a damaged log: %v", err)
	}
	if !strings.Contains(err.Error(), "sequence 16 lost") || !strings.Contains(err.Error(), "capmesh evidence check") {
		t.Errorf("error does not say what to do: %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("Open changed a damaged log")
	}
	if torn, _ := filepath.Glob(path + ".*"); len(torn) != 0 {
		t.Fatalf("Open preserved or cut something: %v", torn)
	}
	r, err := Check(dir)
	if err != nil || len(r.Damaged) != 1 || r.Records != 29 || r.Results != 1 || r.LastSequence != 30 {
		t.Fatalf("Check = %v, %+v", err, r)
	}
	if c := r.Damaged[0].Claims; len(c) != 1 || c[0].Sequence != 16 || c[0].CorrelationID != "c0" {
		t.Errorf("claims %+v, want sequence 16 of c0", c)
	}
	if len(r.Broken) != 1 || r.Broken[0] != (ChainBreak{CorrelationID: "c0", Sequence: 19}) {
		t.Errorf("broken chains %+v, want c0 from 19", r.Broken)
	}
	if r, err = Repair(dir, nil); err != nil || !r.Repaired {
		t.Fatalf("Repair: %v", err)
	}
	ctx := context.Background()
	for round := range 2 {
		s, err := Open(dir, &Options{Logger: quiet})
		if err != nil {
			t.Fatalf("round %d: Open after Repair: %v", round, err)
		}
		if s.LastSequence() != uint64(30+round) {
			t.Fatalf("round %d: LastSequence %d", round, s.LastSequence())
		}
		for c, want := range map[string]int{"c0": 9 + round, "c1": 10, "c2": 10} {
			recs, err := s.Replay(ctx, evidence.Query{CorrelationID: c})
			if err != nil || len(recs) != want {
				t.Fatalf("round %d: %s: %v, %d records, want %d", round, c, err, len(recs), want)
			}
		}
		if _, err := s.Append(ctx, storetest.Event("c0", "e", "after")); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	r, err = Check(dir)
	if err != nil || r.IsDamaged() || len(r.Gaps) != 1 || r.Gaps[0].After != 15 || r.Gaps[0].Next != 17 {
		t.Fatalf("Check after Repair: %v %+v", err, r)
	}
}

// TestZeroedBlockMidLog: a zeroed block in the middle (a lost write) reads
// as damage, not as the end of the log, with every sequence it held
// reported lost.
func TestZeroedBlockMidLog(t *testing.T) {
	dir, _, offs := smallLog(t, 200)
	f, err := os.OpenFile(filepath.Join(dir, FileName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 4096), offs[50]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := Open(dir, &Options{Logger: quiet}); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Open: %v", err)
	}
	r, err := Check(dir)
	if err != nil || len(r.Damaged) != 1 {
		t.Fatalf("Check: %v %+v", err, r)
	}
	d := r.Damaged[0]
	k := 50
	for offs[k] < offs[50]+4096 {
		k++
	} // the first record after the zeros starting at its own offset, or the one it cuts
	if d.Offset != offs[50] || d.After != 50 || d.Next != uint64(k+1) || d.Reason != whyZero {
		t.Fatalf("damage %+v, want from %d, sequences 51–%d", d, offs[50], k)
	}
}

// TestSequenceJump: records that verify but skip sequences without any
// damaged bytes (records removed whole) are damage too.
func TestSequenceJump(t *testing.T) {
	dir, data, offs := smallLog(t, 10)
	cut := append(append([]byte(nil), data[:offs[4]]...), data[offs[6]:]...)
	if err := os.WriteFile(filepath.Join(dir, FileName), cut, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, &Options{Logger: quiet}); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Open: %v", err)
	}
	r, err := Check(dir)
	if err != nil || len(r.Damaged) != 1 || r.Damaged[0].Length != 0 || r.Damaged[0].Missing() != 2 {
		t.Fatalf("Check: %v %+v", err, r)
	}
	if r, err := Repair(dir, nil); err != nil || len(r.Preserved) != 0 {
		t.Fatalf("Repair: %v %+v", err, r)
	}
	if r, err := Check(dir); err != nil || len(r.Gaps) != 1 || r.Gaps[0].Note != "repair: sequences 5-6 missing, no bytes in their place" {
		t.Fatalf("Check after Repair: %v %+v", err, r)
	}
	s, err := Open(dir, &Options{Logger: quiet})
	if err != nil || s.LastSequence() != 10 {
		t.Fatalf("Open after Repair: %v", err)
	}
	s.Close()
}

// TestReadsVersion1Log: a log written before gap records existed
// (testdata/v1, 13 records and a result) reads unchanged.
func TestReadsVersion1Log(t *testing.T) {
	data, err := os.ReadFile("testdata/v1/evidence.log")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if r, err := Check(dir); err != nil || r.IsDamaged() || r.Tail != nil || r.Records != 13 || r.Results != 1 || len(r.Broken) != 0 {
		t.Fatalf("Check: %v %+v", err, r)
	}
	s, err := Open(dir, &Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.LastSequence() != 13 {
		t.Fatalf("LastSequence %d", s.LastSequence())
	}
	n := 0
	_ = s.Results(context.Background(), time.Time{}, func(r evidence.Result) bool { n++; return r.InvocationID == "inv-1" })
	if n != 1 {
		t.Fatalf("%d results", n)
	}
	recs, err := s.Replay(context.Background(), evidence.Query{CorrelationID: "c0"})
	if err != nil || len(recs) != 5 || len(recs[4].ContentHash) != 8 || !strings.HasSuffix(string(recs[4].Data), ":short") {
		t.Fatalf("c0: %v, %d records", err, len(recs))
	}
	for i, r := range recs {
		if (i == 0 && r.PrevHash != "") || (i > 0 && r.PrevHash != recs[i-1].ContentHash) || r.Sequence != []uint64{1, 4, 7, 10, 13}[i] {
			t.Fatalf("c0 record %d: %+v", i, r)
		}
	}
	// Compressed appends after the version 1 records; all read after a
	// reopen.
	if recs, err := s.Append(context.Background(), storetest.Event("c0", "e", "compressed")); err != nil || recs[0].Sequence != 14 {
		t.Fatalf("append: %v", err)
	}
	s.Close()
	if s, err = Open(dir, &Options{Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if recs, err = s.Replay(context.Background(), evidence.Query{CorrelationID: "c0"}); err != nil || len(recs) != 6 || recs[5].PrevHash != recs[4].ContentHash {
		t.Fatalf("c0 after a compressed append: %v, %d records", err, len(recs))
	}
	if r, err := check(s.f, s.phys, FileName); err != nil || r.IsDamaged() || r.Records != 14 {
		t.Fatalf("check after a compressed append: %v %+v", err, r)
	}
}

// TestCheckAndRepairTakeTheLock: a store a host has open is neither
// checked nor repaired.
func TestCheckAndRepairTakeTheLock(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, &Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := Check(dir); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("Check of a store in use: %v", err)
	}
	if _, err := Repair(dir, nil); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("Repair of a store in use: %v", err)
	}
}

// TestRepairNeverOverwrites: damaged bytes found at an offset where an
// earlier repair already preserved some go to a new file; a damaged gap
// record is repaired like any other.
func TestRepairNeverOverwrites(t *testing.T) {
	dir, _, offs := smallLog(t, 10)
	path := filepath.Join(dir, FileName)
	var kept []string
	for round := range 2 {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		data[offs[3]+20] ^= 1 // whatever record now starts there
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := Repair(dir, nil)
		if err != nil || len(r.Preserved) != 1 {
			t.Fatalf("round %d: Repair: %v %+v", round, err, r)
		}
		kept = append(kept, r.Preserved[0])
	}
	if kept[0] != path+fmt.Sprintf(".damaged-%d", offs[3]) || kept[1] != kept[0]+".1" {
		t.Fatalf("preserved in %v", kept)
	}
	// The second flip hit the first repair's gap record (now at that
	// offset): it is replaced by one naming the file that holds it.
	r, err := Check(dir)
	if err != nil || r.IsDamaged() || r.Records != 9 || len(r.Gaps) != 1 || !strings.HasSuffix(r.Gaps[0].Note, filepath.Base(kept[1])) {
		t.Fatalf("Check after two repairs: %v %+v", err, r)
	}
}

// TestDamageUnderAnOpenStore: a frame damaged on disk after Open is never
// served: Replay and Results of what it holds fail with ErrDamaged, the
// rest is still served. In every format: the damaged frames are the
// record and result of the first commit (uncompressed), or its block
// (version 3, or version 2).
func TestDamageUnderAnOpenStore(t *testing.T) {
	for _, uncompressed := range []bool{false, true} {
		t.Run(fmt.Sprint("uncompressed=", uncompressed), func(t *testing.T) { damageUnderAnOpenStore(t, uncompressed, nil) })
	}
	t.Run("v2", func(t *testing.T) { damageUnderAnOpenStore(t, false, appendZstdBlock) })
}

func damageUnderAnOpenStore(t *testing.T, uncompressed bool, block func(dst, raw []byte) []byte) {
	dir := t.TempDir()
	s, err := Open(dir, &Options{Logger: quiet, Uncompressed: uncompressed})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.block = block
	ctx := context.Background()
	recs, err := s.Append(ctx, storetest.Event("a", "e", "first"))
	if err == nil {
		err = s.PutResult(ctx, evidence.Result{InvocationID: "inv", At: time.Unix(5, 0), Data: []byte(`{"r":1}`)})
	}
	if err == nil {
		err = s.Sync(ctx, recs[0].Sequence)
	}
	if err == nil {
		recs, err = s.Append(ctx, storetest.Event("b", "e", "second"))
	}
	if err == nil {
		err = s.Sync(ctx, recs[0].Sequence)
	}
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	var frames []frame
	if _, err := scanLog(bytes.NewReader(data), int64(len(data)), func(fr *frame) error { frames = append(frames, *fr); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := map[bool]int{false: 2, true: 3}[uncompressed]; len(frames) != want {
		t.Fatalf("%d frames, want %d", len(frames), want)
	}
	f, err := os.OpenFile(filepath.Join(dir, FileName), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, fr := range frames[:len(frames)-1] {
		at := fr.off + fr.size - 2
		if _, err := f.WriteAt([]byte{data[at] ^ 0x20}, at); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	if got, err := s.Replay(ctx, evidence.Query{CorrelationID: "a"}); !errors.Is(err, ErrDamaged) {
		t.Errorf("Replay of a damaged record: %v, %d records", err, len(got))
	}
	if err := s.Results(ctx, time.Time{}, func(evidence.Result) bool { return true }); !errors.Is(err, ErrDamaged) {
		t.Errorf("Results with a damaged result: %v", err)
	}
	if got, err := s.Replay(ctx, evidence.Query{CorrelationID: "b"}); err != nil || len(got) != 1 || !strings.HasSuffix(string(got[0].Data), "second") {
		t.Errorf("Replay of an intact record: %v", err)
	}
}

// TestDamagedGapRecordHidesNothing: a gap record (written by an earlier
// Repair) licenses a jump of many sequences; when its own bytes are later
// damaged, the records after it — acknowledged evidence, far beyond the
// sequences the damaged bytes could have held — must still be found.
// Before, they read as a torn tail: Open cut them off the log and went on
// appending at sequences they already had.
func TestDamagedGapRecordHidesNothing(t *testing.T) {
	dir, data, offs := smallLog(t, 200)
	path := filepath.Join(dir, FileName)
	cut := append(append([]byte(nil), data[:offs[50]]...), data[offs[194]:]...) // 1–50, then 195–200
	if err := os.WriteFile(path, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	if r, err := Repair(dir, nil); err != nil || !r.Repaired {
		t.Fatalf("Repair: %v %+v", err, r)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{'X'}, offs[50]+headerSize+12); err != nil { // inside the gap record
		t.Fatal(err)
	}
	f.Close()
	s, err := Open(dir, &Options{Logger: quiet})
	if err == nil {
		last := s.LastSequence()
		s.Close()
		t.Fatalf("Open served the log with a damaged gap record, LastSequence %d (want 200, or ErrDamaged)", last)
	}
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("Open: %v", err)
	}
	r, err := Check(dir)
	if err != nil || r.Records != 56 || r.LastSequence != 200 || r.Tail != nil {
		t.Fatalf("Check = %v, %+v", err, r)
	}
	if r, err := Repair(dir, nil); err != nil || !r.Repaired {
		t.Fatalf("second Repair: %v", err)
	}
	if s, err = Open(dir, &Options{Logger: quiet}); err != nil || s.LastSequence() != 200 {
		t.Fatalf("Open after the second Repair: %v", err)
	}
	s.Close()
}

// blockLog writes n commits of three records each (the first two commits
// with a result too), compressed by block (appendBlock, or
// appendZstdBlock for format version 2), and returns the store
// directory, the log's bytes up to the end of the data and its frames:
// one block per commit.
func blockLog(t *testing.T, n int, block func(dst, raw []byte) []byte) (string, []byte, []frame) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, &Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	s.block = block
	ctx := context.Background()
	for i := range n {
		c := fmt.Sprint("c", i%3)
		recs, err := s.Append(ctx, storetest.Event(c, "a", fmt.Sprint("one-", i)), storetest.Event(c, "b", fmt.Sprint("two-", i)), storetest.Event(c, "c", fmt.Sprint("three-", i)))
		if err == nil && i < 2 {
			err = s.PutResult(ctx, evidence.Result{InvocationID: fmt.Sprint("inv-", i), At: time.Unix(int64(i+1), 0), Data: []byte("{}")})
		}
		if err == nil {
			err = s.Sync(ctx, recs[2].Sequence)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	data, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	data = data[:s.phys]
	var frames []frame
	if _, err := scanLog(bytes.NewReader(data), int64(len(data)), func(fr *frame) error { frames = append(frames, *fr); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(frames) != n || countBlocks(frames) != n {
		t.Fatalf("%d frames, %d blocks, want %d blocks", len(frames), countBlocks(frames), n)
	}
	return dir, data, frames
}

// TestDamagedBlockMidLog: a damaged block in the middle of a compressed
// log, in either block format — a flipped byte in its compressed bytes,
// the whole block zeroed (a lost write), the block cut short, or a block
// whose checksum verifies but whose contents do not decompress (a
// corrupt zstd frame or S2 block, a packed record that does not unpack,
// unpacks past or short of its length, a raw length that lies) or
// decompress to records that do not verify — is reported as damage
// holding its three sequences, never read as the clean end of the log;
// Open refuses the store, Repair keeps every other record.
func TestDamagedBlockMidLog(t *testing.T) {
	type damage struct {
		damage func(b []byte, fr frame) []byte
		reason string
	}
	both := map[string]damage{
		"flipped byte": {func(b []byte, fr frame) []byte { b[fr.off+fr.size/2] ^= 0x40; return b }, "checksum mismatch"},
		"zeroed block": {func(b []byte, fr frame) []byte { clear(b[fr.off : fr.off+fr.size]); return b }, whyZero},
		"cut short": {func(b []byte, fr frame) []byte {
			return append(append([]byte(nil), b[:fr.off+fr.size-5]...), b[fr.off+fr.size:]...)
		}, "checksum mismatch"},
		"raw length lies, resealed": {func(b []byte, fr frame) []byte {
			return resealBlock(b, fr, func(body []byte) []byte { binary.BigEndian.PutUint32(body[10:], maxBlockRaw); return body })
		}, "malformed block: "},
		"inner record damaged, resealed": {func(b []byte, fr frame) []byte {
			return resealBlock(b, fr, func(body []byte) []byte {
				raw, err := decodeBlock(body)
				if err != nil {
					t.Fatal(err)
				}
				raw[len(raw)-1] ^= 1 // the last record's data
				if body[9] < codecS2 {
					return appendZstdBlock(nil, raw)[headerSize:]
				}
				return appendBlock(nil, raw)[headerSize:]
			})
		}, "block: checksum mismatch in block"},
	}
	v2 := map[string]damage{
		"zstd frame corrupt, resealed": {func(b []byte, fr frame) []byte {
			return resealBlock(b, fr, func(body []byte) []byte { body[len(body)-3] ^= 0xff; return body })
		}, "malformed block: "},
	}
	last := func(edit func(body []byte) []byte) func(i, n int, body []byte) []byte {
		return func(i, n int, body []byte) []byte {
			if i == n-1 {
				return edit(body)
			}
			return body
		}
	}
	v3 := map[string]damage{
		"S2 block cut short, resealed": {func(b []byte, fr frame) []byte {
			return resealBlock(b, fr, func(body []byte) []byte { return body[:len(body)-3] })
		}, "malformed block: "},
		"packed record corrupt, resealed":                 {repacked(t, last(func(body []byte) []byte { return append(body, 0x01) })), "malformed block: "},
		"packed record unpacks past its length, resealed": {repacked(t, last(func(body []byte) []byte { return append(body, 'x') })), "malformed block: "},
		"packed record unpacks short, resealed":           {repacked(t, last(func(body []byte) []byte { return body[:len(body)-1] })), "malformed block: "},
	}
	for _, format := range []struct {
		name  string
		block func(dst, raw []byte) []byte
		cases map[string]damage
	}{{"v2", appendZstdBlock, v2}, {"v3", appendBlock, v3}} {
		for name, c := range both {
			format.cases[name] = c
		}
		for name, c := range format.cases {
			t.Run(format.name+"/"+name, func(t *testing.T) { damagedBlockMidLog(t, format.block, c.damage, c.reason) })
		}
	}
}

// resealBlock returns b with the block fr's body edited by edit, its
// frame resealed (its checksum verifies).
func resealBlock(b []byte, fr frame, edit func(body []byte) []byte) []byte {
	body := edit(append([]byte(nil), b[fr.off+headerSize:fr.off+fr.size]...))
	rec := append(make([]byte, headerSize), body...)
	seal(rec)
	return append(append(append([]byte(nil), b[:fr.off]...), rec...), b[fr.off+fr.size:]...)
}

// repacked returns a damage that rewrites a version 3 block with each of
// its n records' packed body edited by edit, the S2 block and frame made
// anew: only the packed records are wrong.
func repacked(t *testing.T, edit func(i, n int, body []byte) []byte) func(b []byte, fr frame) []byte {
	return func(b []byte, fr frame) []byte {
		return resealBlock(b, fr, func(body []byte) []byte {
			raw, err := decodeBlock(body)
			if err != nil {
				t.Fatal(err)
			}
			var recs [][]byte
			records(raw, func(_ int, rec []byte, _ string) bool { recs = append(recs, rec); return true })
			var pk []byte
			for i, rec := range recs {
				one := packed.Append(nil, rec)
				_, w := binary.Uvarint(one[headerSize:])
				pb := edit(i, len(recs), one[headerSize+w:])
				pk = append(append(append(pk, one[:headerSize]...), binary.AppendUvarint(nil, uint64(len(pb)))...), pb...)
			}
			return append(body[:blockHeader:blockHeader], dictV3().Encode(nil, pk)...)
		})
	}
}

func damagedBlockMidLog(t *testing.T, block func(dst, raw []byte) []byte, damage func(b []byte, fr frame) []byte, reason string) {
	dir, data, frames := blockLog(t, 6, block)
	k := 3
	bad := damage(data, frames[k])
	if err := os.WriteFile(filepath.Join(dir, FileName), bad, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, &Options{Logger: quiet})
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "sequences 10-12 lost") {
		t.Fatalf("Open: %v, want ErrDamaged with sequences 10-12 lost", err)
	}
	r, err := Check(dir)
	if err != nil || len(r.Damaged) != 1 || r.Tail != nil || r.Records != 15 {
		t.Fatalf("Check = %v, %+v", err, r)
	}
	if d := r.Damaged[0]; d.Offset != frames[k].off || d.After != 9 || d.Next != 13 || !strings.HasPrefix(d.Reason, reason) {
		t.Fatalf("damage %+v, want at %d, sequences 10-12, reason %q", d, frames[k].off, reason)
	}
	t.Logf("damage: %s", r.Damaged[0].Reason)
	if r, err := Repair(dir, nil); err != nil || !r.Repaired || len(r.Preserved) != 1 {
		t.Fatalf("Repair = %v, %+v", err, r)
	}
	s, err := Open(dir, &Options{Logger: quiet})
	if err != nil {
		t.Fatalf("Open after Repair: %v", err)
	}
	defer s.Close()
	if s.LastSequence() != 18 {
		t.Fatalf("LastSequence %d", s.LastSequence())
	}
	for corr, want := range map[string]int{"c0": 6 - 3, "c1": 6, "c2": 6} { // block 3 held c0's
		recs, err := s.Replay(context.Background(), evidence.Query{CorrelationID: corr})
		if err != nil || len(recs) != want {
			t.Fatalf("%s: %v, %d records, want %d", corr, err, len(recs), want)
		}
	}
}

// TestMixedFormats: a store written uncompressed (format version 1, as
// releases before compression wrote it) opens with compression on, takes
// compressed appends after its records, and reads all of them after a
// reopen; Check finds nothing wrong.
func TestMixedFormats(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	write := func(uncompressed bool, from int) {
		s, err := Open(dir, &Options{Logger: quiet, Uncompressed: uncompressed})
		if err != nil {
			t.Fatal(err)
		}
		for i := from; i < from+10; i++ {
			recs, err := s.Append(ctx, storetest.Event(fmt.Sprint("m", i%2), "e", fmt.Sprint("body-", i)))
			if err == nil {
				err = s.PutResult(ctx, evidence.Result{InvocationID: fmt.Sprint("inv-", i), At: time.Unix(int64(i+1), 0), Data: []byte("{}")})
			}
			if err == nil {
				err = s.Sync(ctx, recs[0].Sequence)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	write(true, 0)
	write(false, 10)
	data, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	var frames []frame
	if _, err := scanLog(bytes.NewReader(data), int64(len(data)), func(fr *frame) error { frames = append(frames, *fr); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(frames) != 30 || countBlocks(frames) != 10 || frames[19].block || !frames[20].block {
		t.Fatalf("%d frames, %d blocks: want 20 records and results, then 10 blocks", len(frames), countBlocks(frames))
	}
	if r, err := Check(dir); err != nil || r.IsDamaged() || r.Records != 20 || r.Results != 20 || len(r.Broken) != 0 {
		t.Fatalf("Check: %v %+v", err, r)
	}
	s, err := Open(dir, &Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkChains(t, s)
	for _, c := range []string{"m0", "m1"} {
		if recs, err := s.Replay(ctx, evidence.Query{CorrelationID: c}); err != nil || len(recs) != 10 {
			t.Fatalf("%s: %v, %d records", c, err, len(recs))
		}
	}
	n := 0
	if err := s.Results(ctx, time.Time{}, func(evidence.Result) bool { n++; return true }); err != nil || n != 20 {
		t.Fatalf("%d results: %v", n, err)
	}
}

// TestReadsVersion2Log: a log written by format version 2 (testdata/v2,
// made by the zstd writer: a block with the dictionary, a full block
// without it, two more with it; 44 records and a result) reads, checks
// and takes appends unchanged; one flipped byte in its second block is
// damage that Repair moves aside, keeping the other blocks.
func TestReadsVersion2Log(t *testing.T) {
	data, err := os.ReadFile("testdata/v2/evidence.log")
	if err != nil {
		t.Fatal(err)
	}
	var frames []frame
	var codecs []byte
	if _, err := scanLog(bytes.NewReader(data), int64(len(data)), func(fr *frame) error {
		frames = append(frames, *fr)
		codecs = append(codecs, fr.raw[headerSize+9])
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if countBlocks(frames) != 4 || !bytes.Equal(codecs, []byte{dictV1, dictNone, dictV1, dictV1}) {
		t.Fatalf("%d frames, %d blocks, codecs %v: not the version 2 fixture", len(frames), countBlocks(frames), codecs)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if r, err := Check(dir); err != nil || r.IsDamaged() || r.Tail != nil || r.Records != 44 || r.Results != 1 || len(r.Broken) != 0 {
		t.Fatalf("Check: %v %+v", err, r)
	}
	s, err := Open(dir, &Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	checkChains(t, s)
	for c, want := range map[string]int{"c0": 17, "c1": 14, "c2": 13} {
		recs, err := s.Replay(context.Background(), evidence.Query{CorrelationID: c})
		if err != nil || len(recs) != want || c == "c0" && len(recs[16].ContentHash) != 8 {
			t.Fatalf("%s: %v, %d records, want %d", c, err, len(recs), want)
		}
	}
	if recs, err := s.Append(context.Background(), storetest.Event("c0", "e", "version 3")); err != nil || recs[0].Sequence != 45 {
		t.Fatalf("append: %v", err)
	}
	s.Close()
	if r, err := Check(dir); err != nil || r.IsDamaged() || r.Records != 45 || len(r.Broken) != 0 {
		t.Fatalf("Check after an append: %v %+v", err, r)
	}
	bad := append([]byte(nil), data...)
	bad[frames[1].off+frames[1].size/2] ^= 0x10
	r, err := check(bytes.NewReader(bad), int64(len(bad)), FileName)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, "version 2, second block flipped", r, frames[1])
	checkInMemory(t, "version 2, second block flipped", bad, frames, 1)
}
