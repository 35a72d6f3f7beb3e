// Package groupcommit is the leader/follower protocol the durable evidence
// stores share: callers ask for a position to be durable; one of them at a
// time becomes the leader and commits everything pending (one write and one
// fsync for every caller whose data is in it), while the others wait for
// that commit or the next one.
package groupcommit

import (
	"context"
	"sync"
)

// Committer coordinates the commits of one store. Its zero value is not
// ready: use New.
type Committer struct {
	mu      sync.Mutex
	synced  uint64 // position covered by the last successful commit
	syncing bool   // a leader is committing
	done    chan struct{}
	commit  func() (uint64, error)
	failed  func() error
}

// New returns a Committer whose data up to synced is already durable (for
// example, what a store found on disk when it opened). commit makes
// everything pending durable and returns the position it covers; only one
// commit runs at a time. failed reports whether the store can still promise
// durability (nil) or why not.
func New(synced uint64, commit func() (uint64, error), failed func() error) *Committer {
	return &Committer{synced: synced, done: make(chan struct{}), commit: commit, failed: failed}
}

// Sync returns once every position up to target is durable. The caller
// that finds no commit running runs the commit; the others wait for it
// and, if target is still not covered, for the next. A failed commit is
// returned to its leader; the callers that waited on it learn of it from
// the failed function. ctx bounds the waiting, not a commit in progress.
func (c *Committer) Sync(ctx context.Context, target uint64) error {
	c.mu.Lock()
	for c.synced < target {
		if !c.syncing {
			c.syncing = true
			c.mu.Unlock()
			covered, err := c.commit()
			c.mu.Lock()
			c.syncing = false
			if err == nil && covered > c.synced {
				c.synced = covered
			}
			close(c.done)
			c.done = make(chan struct{})
			if err != nil {
				c.mu.Unlock()
				return err
			}
			continue
		}
		done := c.done
		c.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := c.failed(); err != nil {
			return err
		}
		c.mu.Lock()
	}
	c.mu.Unlock()
	return nil
}

// Wait returns when no commit is running. A store's Close calls it after
// refusing new work, so that it never closes files under a leader.
func (c *Committer) Wait() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.syncing {
		done := c.done
		c.mu.Unlock()
		<-done
		c.mu.Lock()
	}
}
