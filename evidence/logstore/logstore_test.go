package logstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/storetest"
)

func TestSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) evidence.Store {
		s, err := Open(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// checkChains verifies every correlation's chain in s from the record data
// written by storetest.Event ("seq:prev:body"); a short content hash
// (storetest.EventTo's) is the full one's first 8 digits.
func checkChains(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	s.mu.RLock()
	var corrs []string
	for c := range s.chains {
		corrs = append(corrs, c)
	}
	s.mu.RUnlock()
	for _, c := range corrs {
		recs, err := s.Replay(ctx, evidence.Query{CorrelationID: c})
		if err != nil {
			t.Fatal(err)
		}
		prev := ""
		for _, r := range recs {
			parts := strings.SplitN(string(r.Data), ":", 3)
			sum := sha256.Sum256(fmt.Appendf(nil, "%s|%d|%s", prev, r.Sequence, parts[2]))
			if h := hex.EncodeToString(sum[:]); r.PrevHash != prev || h != r.ContentHash && (len(r.ContentHash) != 8 || h[:8] != r.ContentHash) {
				t.Fatalf("correlation %s broken at sequence %d", c, r.Sequence)
			}
			prev = r.ContentHash
		}
	}
}

func TestReopenAndPermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ev")
	ctx := context.Background()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if _, err := s.Append(ctx, storetest.Event(fmt.Sprint("c", i%3), "execution_started", fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(dir, nil); err == nil {
		t.Fatal("a second Open of a live store succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, FileName): 0o600} {
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != want {
			t.Errorf("%s mode %v, want %v", path, st.Mode().Perm(), want)
		}
	}
	s, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.LastSequence() != 10 {
		t.Fatalf("reopened LastSequence = %d", s.LastSequence())
	}
	if n, _ := s.Count(ctx, "c0", "execution_started"); n != 4 {
		t.Errorf("Count after reopen = %d, want 4", n)
	}
	recs, err := s.Append(ctx, storetest.Event("c0", "x", "more"))
	if err != nil || recs[0].Sequence != 11 {
		t.Fatalf("append after reopen: %v %+v", err, recs)
	}
	checkChains(t, s)
}

func TestTornTail(t *testing.T) {
	ctx := context.Background()
	for name, tear := range map[string]func(t *testing.T, path string, size int64){
		"partial record": func(t *testing.T, path string, size int64) {
			// Cut the last record in half.
			if err := os.Truncate(path, size-7); err != nil {
				t.Fatal(err)
			}
		},
		"garbage appended": func(t *testing.T, path string, size int64) {
			f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			f.Write([]byte{0, 0, 0, 40, 1, 2, 3})
			f.Close()
		},
		"flipped byte": func(t *testing.T, path string, size int64) {
			f, _ := os.OpenFile(path, os.O_WRONLY, 0)
			f.WriteAt([]byte{0xff}, size-3)
			f.Close()
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 5; i++ { // each its own commit: the last in a frame of its own
				recs, err := s.Append(ctx, storetest.Event("c", "e", fmt.Sprint(i)))
				if err == nil {
					err = s.Sync(ctx, recs[0].Sequence)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			s.Close()
			size := s.PhysicalSize()
			tear(t, filepath.Join(dir, FileName), size)
			s, err = Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			want := uint64(5)
			if name != "garbage appended" {
				want = 4 // the torn record itself is gone
			}
			if s.LastSequence() != want {
				t.Fatalf("LastSequence = %d, want %d", s.LastSequence(), want)
			}
			torn, _ := filepath.Glob(filepath.Join(dir, FileName+".torn-*"))
			if len(torn) != 1 {
				t.Fatalf("torn tail not preserved: %v", torn)
			}
			if recs, err := s.Append(ctx, storetest.Event("c", "e", "after")); err != nil || recs[0].Sequence != want+1 {
				t.Fatalf("append after recovery: %v", err)
			}
			checkChains(t, s)
		})
	}
}

// TestCrashDurability: every acknowledged record and result survives
// SIGKILL (storetest.Crash).
func TestCrashDurability(t *testing.T) {
	storetest.Crash(t, func(dir string) (evidence.Store, error) { return Open(dir, nil) })
}

func TestDurable(t *testing.T) {
	storetest.RunDurable(t, func(t *testing.T, dir string) evidence.Store {
		s, err := Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestOddHashLength: a record whose content hash is not 64 digits is
// re-encoded around it and reads back after a reopen.
func TestOddHashLength(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, storetest.EventTo("h", "e", "one", true), storetest.EventTo("h", "e", "two", false), storetest.EventTo("h", "e", "three", true)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs, err := s.Replay(ctx, evidence.Query{CorrelationID: "h"})
	if err != nil || len(recs) != 3 {
		t.Fatalf("replay after reopen: %v, %d records", err, len(recs))
	}
	for i, want := range []int{8, 64, 8} {
		if len(recs[i].ContentHash) != want || !strings.HasSuffix(string(recs[i].Data), []string{"one", "two", "three"}[i]) {
			t.Errorf("record %d: hash %q data %q", i, recs[i].ContentHash, recs[i].Data)
		}
	}
	if recs[1].PrevHash != recs[0].ContentHash || recs[2].PrevHash != recs[1].ContentHash {
		t.Error("chain broken across re-encoded records")
	}
}

// TestPreallocatedTail: the zeros kept ahead of the data read as the end of
// the log (no torn-tail report), and bytes found beyond a gap of zeros —
// the remains of a write that was never acknowledged — are preserved and
// removed, so they can never reappear behind later appends.
func TestPreallocatedTail(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	path := filepath.Join(dir, FileName)
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := s.Append(ctx, storetest.Event("p", "e", "1"), storetest.Event("p", "e", "2"))
	if err != nil || s.Sync(ctx, recs[1].Sequence) != nil {
		t.Fatal(err)
	}
	end := s.PhysicalSize()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, _ := os.Stat(path)
		if st.Size() >= end+minAhead/2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("file is %d bytes, data %d: nothing preallocated", st.Size(), end)
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.Close()
	if s, err = Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	if s.LastSequence() != 2 {
		t.Fatalf("LastSequence = %d", s.LastSequence())
	}
	s.Close()
	if torn, _ := filepath.Glob(path + ".torn-*"); len(torn) != 0 {
		t.Fatalf("preallocated zeros reported as torn: %v", torn)
	}
	// A stale record beyond a gap of zeros.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("stale, never acknowledged"), end+4096); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if s, err = Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	torn, _ := filepath.Glob(path + ".torn-*")
	if len(torn) != 1 {
		t.Fatalf("stale bytes not preserved: %v", torn)
	}
	if b, _ := os.ReadFile(torn[0]); !strings.HasSuffix(string(b), "stale, never acknowledged") || len(b) != 4096+25 {
		t.Errorf("preserved %d bytes", len(b))
	}
	if recs, err := s.Append(ctx, storetest.Event("p", "e", "3")); err != nil || recs[0].Sequence != 3 {
		t.Fatalf("append after recovery: %v", err)
	}
	checkChains(t, s)
}

// FuzzRecover: whatever bytes evidence.log holds, Open either recovers
// without a panic (keeping a valid prefix, cutting a torn tail) or refuses
// a damaged log with ErrDamaged, in which case Repair makes it open; either
// way the store takes appends afterwards and reopens with them.
func FuzzRecover(f *testing.F) {
	for _, uncompressed := range []bool{true, false} {
		dir := f.TempDir()
		s, err := Open(dir, &Options{NoSync: true, Uncompressed: uncompressed})
		if err != nil {
			f.Fatal(err)
		}
		ctx := context.Background()
		recs, _ := s.Append(ctx, storetest.Event("c", "e", "1"), storetest.EventTo("c", "e", "2", false))
		_ = s.PutResult(ctx, evidence.Result{InvocationID: "i", At: time.Unix(1, 0), Data: []byte("{}")})
		_ = s.Sync(ctx, recs[1].Sequence) // compressed: a block, then another
		_, _ = s.Append(ctx, storetest.Event("d", "e", "3"))
		s.Close()
		end := s.PhysicalSize()
		good, _ := os.ReadFile(filepath.Join(dir, FileName))
		good = good[:end] // without the zeros prepared ahead
		f.Add(good)
		f.Add(append(append([]byte{}, good...), make([]byte, 300)...))
		f.Add(good[:len(good)/2])
		flipped := append([]byte{}, good...)
		flipped[20] ^= 1 // the first frame: damage before frames that verify
		f.Add(flipped)
	}
	f.Add([]byte{0, 0, 0, 10, 1, 2, 3, 4})
	f.Add(append([]byte{}, make([]byte, 64)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, FileName), data, 0o600); err != nil {
			t.Fatal(err)
		}
		opts := &Options{NoSync: true, Logger: slog.New(slog.DiscardHandler)}
		r, err := Check(dir)
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		intact := len(r.Broken) == 0 && len(r.Gaps) == 0 && !r.IsDamaged()
		s, err := Open(dir, opts)
		if errors.Is(err, ErrDamaged) {
			if _, err := Repair(dir, opts); err != nil {
				t.Fatalf("Repair: %v", err)
			}
			s, err = Open(dir, opts)
		}
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		last := s.LastSequence()
		recs, err := s.Append(context.Background(), storetest.Event("z", "e", "after"))
		if err != nil || recs[0].Sequence != last+1 {
			t.Fatalf("append after recovery: %v %+v (last %d)", err, recs, last)
		}
		if intact { // a repaired log keeps what verifies, chains broken or not
			checkChains(t, s)
		}
		_ = s.Results(context.Background(), time.Time{}, func(evidence.Result) bool { return true })
		s.Close()
		if s, err = Open(dir, opts); err != nil || s.LastSequence() != last+1 {
			t.Fatalf("reopen after the append: %v", err)
		}
		s.Close()
	})
}
