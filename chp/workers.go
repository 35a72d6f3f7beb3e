package chp

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Invocations that arrive on a fresh goroutine run on a reused one.
//
// The jsonrpc server starts a goroutine per call, and a new goroutine starts
// with a small stack (the runtime's running average). The pipeline — gates,
// sealing, two SHA-256 digests per event — needs several KiB, so every call
// used to pay for growing and copying its stack, which measured more than
// the rest of the pipeline (docs/BENCHMARKS.md). A worker that has run one
// invocation keeps its grown stack for the next: handing the call over costs
// a channel send and a wake-up instead. Workers exist only while there is
// work: one that stays idle for workerIdle exits.

const workerIdle = 250 * time.Millisecond

// job is one invocation handed to a worker; jobs are pooled.
type job struct {
	b    *Boundary
	ctx  context.Context
	env  *InvocationEnvelope
	res  *InvocationResult
	err  error
	pan  any
	done chan struct{} // buffered: the worker signals, the caller receives
}

var (
	jobs        = make(chan *job) // unbuffered: a send succeeds only to an idle worker
	jobPool     = sync.Pool{New: func() any { return &job{done: make(chan struct{}, 1)} }}
	liveWorkers atomic.Int64
)

// invokeOnWorker runs b.Invoke(ctx, env) on a worker goroutine and waits
// for it. A panic is re-raised in the caller, where the transport's
// recovery expects it.
func (b *Boundary) invokeOnWorker(ctx context.Context, env *InvocationEnvelope) (*InvocationResult, error) {
	j := jobPool.Get().(*job)
	j.b, j.ctx, j.env = b, ctx, env
	select {
	case jobs <- j:
	default:
		liveWorkers.Add(1)
		go worker(j)
	}
	<-j.done
	res, err, pan := j.res, j.err, j.pan
	*j = job{done: j.done}
	jobPool.Put(j)
	if pan != nil {
		panic(pan)
	}
	return res, err
}

func worker(j *job) {
	defer liveWorkers.Add(-1)
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		j.run()
		idle.Reset(workerIdle)
		select {
		case j = <-jobs:
		case <-idle.C:
			return
		}
	}
}

func (j *job) run() {
	defer func() {
		if p := recover(); p != nil {
			j.pan = p
		}
		j.done <- struct{}{}
	}()
	j.res, j.err = j.b.Invoke(j.ctx, j.env)
}
