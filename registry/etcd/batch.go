package etcd

import (
	"context"
	"errors"
	"sync"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/capmesh/capmesh/registry"
)

// Group commit: ApplyIf calls that arrive while transactions are in
// flight (at most maxInFlight) wait and go together in the next one, If(every condition)
// Then(every write), as long as they touch disjoint keys and fit etcd's
// limits on operations and on a request's bytes (maxTxnBytes). When the joint conditions fail, each call is
// retried alone so that only the one that lost its race gets
// registry.ErrConflict. The calls of one transaction share its revision.
// One etcd round trip then serves many registrations: a node's write rate
// is not bounded by the round trips of its callers.

// pending is one ApplyIf waiting for its transaction.
type pending struct {
	cmps []clientv3.Cmp
	ops  []clientv3.Op
	keys map[string]bool // every key the call compares or writes
	size int             // bytes of its keys and values
	done chan result
}

// maxTxnBytes is how many bytes of keys and values calls sharing a
// transaction carry at most, well within etcd's default limit on a
// request (--max-request-bytes, 1.5 MiB) and the client's on a message
// (2 MiB). A larger call goes alone: etcd takes it or refuses it, and
// no other call fails with it.
const maxTxnBytes = 1 << 20

type result struct {
	rev uint64
	err error
}

// maxInFlight is how many transactions a store has in flight at once;
// calls touching a key of one in flight wait for it.
const maxInFlight = 1

// batcher queues pending calls for the committer goroutine.
type batcher struct {
	mu       sync.Mutex
	queue    []*pending
	inflight map[string]bool // keys of the transactions in flight
	slots    chan struct{}
	kick     chan struct{}
	stopped  chan struct{}
	commits  sync.WaitGroup
}

var errClosed = errors.New("registry/etcd: the store is closed")

func (b *batcher) start(s *Store) {
	b.kick = make(chan struct{}, 1)
	b.stopped = make(chan struct{})
	b.slots = make(chan struct{}, maxInFlight)
	b.inflight = map[string]bool{}
	go b.run(s)
}

// wait waits for the committer to end (after the store's context).
func (b *batcher) wait() { <-b.stopped }

// submit queues p and waits for its transaction.
func (s *Store) submit(ctx context.Context, p *pending) (uint64, error) {
	b := &s.batch
	b.mu.Lock()
	b.queue = append(b.queue, p)
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default:
	}
	select {
	case r := <-p.done:
		return r.rev, r.err
	case <-ctx.Done():
		return 0, s.wrap("write (outcome unknown)", ctx.Err())
	case <-s.ctx.Done():
		return 0, errClosed
	}
}

func (b *batcher) run(s *Store) {
	defer close(b.stopped)
	for {
		select {
		case <-s.ctx.Done():
			b.commits.Wait()
			b.mu.Lock()
			for _, p := range b.queue {
				p.done <- result{err: errClosed}
			}
			b.queue = nil
			b.mu.Unlock()
			return
		case <-b.kick:
		}
		b.dispatch(s)
	}
}

// dispatch starts transactions for the queue while slots are free.
func (b *batcher) dispatch(s *Store) {
	for {
		select {
		case b.slots <- struct{}{}:
		case <-s.ctx.Done():
			return
		}
		batch := b.take()
		if len(batch) == 0 {
			<-b.slots
			return
		}
		b.commits.Add(1)
		go func() {
			defer b.commits.Done()
			s.commit(batch)
			b.mu.Lock()
			for _, p := range batch {
				for k := range p.keys {
					delete(b.inflight, k)
				}
			}
			b.mu.Unlock()
			<-b.slots
			select { // the queue may hold calls that waited for these keys
			case b.kick <- struct{}{}:
			default:
			}
		}()
	}
}

// take removes from the queue, in order, the calls that fit one
// transaction: disjoint keys, at most maxOpsPerTxn operations, and
// maxTxnBytes unless the call is alone.
func (b *batcher) take() []*pending {
	b.mu.Lock()
	defer b.mu.Unlock()
	var batch, rest []*pending
	blocked := map[string]bool{} // keys of calls left in the queue
	n, size := 0, 0
	for _, p := range b.queue {
		fits := n+len(p.cmps)+len(p.ops) <= maxOpsPerTxn && (len(batch) == 0 || size+p.size <= maxTxnBytes)
		for k := range p.keys {
			fits = fits && !b.inflight[k] && !blocked[k]
		}
		if !fits {
			// It waits; so does any later call on its keys (order per key).
			for k := range p.keys {
				blocked[k] = true
			}
			rest = append(rest, p)
			continue
		}
		for k := range p.keys {
			b.inflight[k] = true
		}
		n, size = n+len(p.cmps)+len(p.ops), size+p.size
		batch = append(batch, p)
	}
	b.queue = rest
	return batch
}

// commit runs one transaction for batch, and each call alone when the
// joint conditions fail.
func (s *Store) commit(batch []*pending) {
	var cmps []clientv3.Cmp
	var ops []clientv3.Op
	for _, p := range batch {
		cmps = append(cmps, p.cmps...)
		ops = append(ops, p.ops...)
	}
	rev, ok, err := s.txn(cmps, ops)
	if err != nil || ok || len(batch) == 1 {
		for _, p := range batch {
			switch {
			case err != nil:
				p.done <- result{err: err}
			case !ok:
				p.done <- result{err: registry.ErrConflict}
			default:
				p.done <- result{rev: rev}
			}
		}
		return
	}
	for _, p := range batch {
		s.commit([]*pending{p})
	}
}

func (s *Store) txn(cmps []clientv3.Cmp, ops []clientv3.Op) (uint64, bool, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.RequestTimeout)
	defer cancel()
	resp, err := s.c.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return 0, false, err
		}
		return 0, false, s.wrap("write", err)
	}
	return uint64(resp.Header.Revision), resp.Succeeded, nil
}
