package groupcommit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeLog is a store whose commits take a while: appends advance end, a
// commit makes everything appended so far durable.
type fakeLog struct {
	end     atomic.Uint64
	durable atomic.Uint64
	commits atomic.Int64
	running atomic.Int32
	fail    atomic.Pointer[error]
	overlap atomic.Bool
}

func (f *fakeLog) commit() (uint64, error) {
	if f.running.Add(1) != 1 {
		f.overlap.Store(true)
	}
	defer f.running.Add(-1)
	f.commits.Add(1)
	covered := f.end.Load()
	time.Sleep(2 * time.Millisecond)
	if p := f.fail.Load(); p != nil {
		return 0, *p
	}
	f.durable.Store(max(f.durable.Load(), covered))
	return covered, nil
}

func (f *fakeLog) failed() error {
	if p := f.fail.Load(); p != nil {
		return *p
	}
	return nil
}

func TestCallersShareCommits(t *testing.T) {
	f := &fakeLog{}
	c := New(0, f.commit, f.failed)
	const callers, rounds = 32, 10
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range rounds {
				pos := f.end.Add(1)
				if err := c.Sync(context.Background(), pos); err != nil {
					t.Errorf("Sync(%d): %v", pos, err)
					return
				}
				if d := f.durable.Load(); d < pos {
					t.Errorf("Sync(%d) returned with only %d durable", pos, d)
				}
			}
		})
	}
	wg.Wait()
	if f.overlap.Load() {
		t.Fatal("two commits ran at once")
	}
	if n := f.commits.Load(); n >= callers*rounds/2 {
		t.Fatalf("%d commits for %d syncs: callers did not share commits", n, callers*rounds)
	}
	t.Logf("%d commits for %d syncs", f.commits.Load(), callers*rounds)
}

func TestAlreadyDurableCommitsNothing(t *testing.T) {
	f := &fakeLog{}
	c := New(7, f.commit, f.failed)
	if err := c.Sync(context.Background(), 7); err != nil {
		t.Fatal(err)
	}
	if n := f.commits.Load(); n != 0 {
		t.Fatalf("%d commits for a position already durable", n)
	}
}

func TestFailureReachesLeaderAndFollowers(t *testing.T) {
	f := &fakeLog{}
	boom := errors.New("disk on fire")
	f.fail.Store(&boom)
	c := New(0, f.commit, f.failed)
	f.end.Store(1)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- c.Sync(context.Background(), 1) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, boom) {
			t.Fatalf("Sync = %v, want %v", err, boom)
		}
	}
}

func TestContextBoundsTheWait(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	c := New(0, func() (uint64, error) {
		close(started)
		<-release
		return 2, nil
	}, func() error { return nil })
	go c.Sync(context.Background(), 1)
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := c.Sync(ctx, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Sync with a deadline during a stuck commit = %v, want DeadlineExceeded", err)
	}
	waited := make(chan struct{})
	go func() { c.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("Wait returned while a commit was running")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-waited
	if err := c.Sync(context.Background(), 2); err != nil {
		t.Fatalf("Sync after the commit covered it: %v", err)
	}
}
