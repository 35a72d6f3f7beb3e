package logstore

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
// written by storetest.Event ("seq:prev:body").
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
			if r.PrevHash != prev || hex.EncodeToString(sum[:]) != r.ContentHash {
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
			for i := 0; i < 5; i++ {
				if _, err := s.Append(ctx, storetest.Event("c", "e", fmt.Sprint(i))); err != nil {
					t.Fatal(err)
				}
			}
			size := s.size
			s.Close()
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

// TestCrashDurability re-executes this test binary as a child that appends
// and acknowledges (prints) each durable record, kills it with SIGKILL at a
// random moment, reopens the store and checks that every acknowledged
// record survived and every chain verifies. Several rounds share one store.
func TestCrashDurability(t *testing.T) {
	if dir := os.Getenv("LOGSTORE_CRASH_CHILD"); dir != "" {
		crashChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("crash test spawns processes")
	}
	dir := t.TempDir()
	acked := map[uint64]string{}
	for round := 0; round < 6; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashDurability$")
		cmd.Env = append(os.Environ(), "LOGSTORE_CRASH_CHILD="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		// Wait until the child is appending, then kill it at a random moment.
		if !sc.Scan() {
			t.Fatalf("child produced no output")
		}
		deadline := time.Now().Add(time.Duration(5+rand.IntN(60)) * time.Millisecond)
		lines := []string{sc.Text()}
		go func() {
			time.Sleep(time.Until(deadline))
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}()
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		_ = cmd.Wait()
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) != 3 || f[0] != "ack" {
				continue
			}
			seq, _ := strconv.ParseUint(f[1], 10, 64)
			acked[seq] = f[2]
		}
		s, err := Open(dir, nil)
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		for seq, corr := range acked {
			recs, err := s.Replay(context.Background(), evidence.Query{CorrelationID: corr, After: seq - 1, Limit: 1})
			if err != nil || len(recs) != 1 || recs[0].Sequence != seq {
				t.Fatalf("round %d: acknowledged record %d of %s lost", round, seq, corr)
			}
		}
		checkChains(t, s)
		s.Close()
	}
	if len(acked) == 0 {
		t.Fatal("no record was acknowledged")
	}
	t.Logf("%d acknowledged records survived 6 SIGKILLs", len(acked))
}

func crashChild(dir string) {
	s, err := Open(dir, nil)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	ctx := context.Background()
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(w, "ready")
	w.Flush()
	for i := 0; ; i++ {
		corr := fmt.Sprint("k", rand.IntN(8))
		recs, err := s.Append(ctx, storetest.Event(corr, "execution_started", fmt.Sprint(i)), storetest.Event(corr, "execution_completed", fmt.Sprint(i)))
		if err != nil {
			os.Exit(2)
		}
		if err := s.Sync(ctx, recs[1].Sequence); err != nil {
			os.Exit(3)
		}
		fmt.Fprintf(w, "ack %d %s\nack %d %s\n", recs[0].Sequence, corr, recs[1].Sequence, corr)
		w.Flush()
	}
}
