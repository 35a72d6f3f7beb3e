// Package workers is the goroutine pool package jsonrpc's Server runs
// handler calls on.
package workers

import (
	"sync"
	"time"
)

// Pool runs handler calls on reused goroutines. A goroutine started
// per call begins with a small stack and, for any handler that encodes JSON
// or runs a governed pipeline, grows and copies it on every call; a worker
// that has served a call keeps its grown stack for the next. Idle workers
// wait on an unbuffered channel, so a submit succeeds only when one is
// free; otherwise a new worker is started. Workers exit after idleWorker
// without work, and all of them when the pool is closed.
type Pool struct {
	work chan func()
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

const idleWorker = 10 * time.Second

// New returns an empty pool.
func New() *Pool {
	return &Pool{work: make(chan func()), stop: make(chan struct{})}
}

// Submit runs f on an idle worker, or on a new one.
func (p *Pool) Submit(f func()) {
	select {
	case p.work <- f:
		return
	default:
	}
	select {
	case <-p.stop:
		// Closed: run without pooling.
		go f()
		return
	default:
	}
	p.wg.Add(1)
	go p.worker(f)
}

func (p *Pool) worker(f func()) {
	defer p.wg.Done()
	t := time.NewTimer(idleWorker)
	defer t.Stop()
	for {
		f()
		f = nil
		t.Reset(idleWorker)
		select {
		case f = <-p.work:
		case <-t.C:
			return
		case <-p.stop:
			return
		}
	}
}

// Close stops idle workers; busy ones exit after their call. It waits for
// all of them.
func (p *Pool) Close() {
	p.once.Do(func() { close(p.stop) })
	p.wg.Wait()
}
