package evidence

import (
	"context"
	"sync"
)

// Memory is an in-memory Store: the reference implementation for tests and
// for hosts that need no durability. Sync is a no-op.
type Memory struct {
	mu     sync.RWMutex
	closed bool
	seq    uint64
	// pages hold the records, record n (sequence n+1) at
	// pages[n/pageSize][n%pageSize]; fixed-size pages never move, so an
	// append never copies earlier records.
	pages  [][]Record
	chains map[string]*Chain
}

const pageSize = 4096

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory { return &Memory{chains: map[string]*Chain{}} }

// Name implements Store.
func (m *Memory) Name() string { return "memory" }

// Append implements Store.
func (m *Memory) Append(ctx context.Context, batch ...Pending) ([]Record, error) {
	if err := Validate(batch); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	out, err := SealBatch(m.seq, batch, func(corr string) string {
		if c := m.chains[corr]; c != nil {
			return c.Head
		}
		return ""
	})
	if err != nil {
		return nil, err
	}
	for _, r := range out {
		c := m.chains[r.CorrelationID]
		if c == nil {
			c = &Chain{}
			m.chains[r.CorrelationID] = c
		}
		n := int(r.Sequence - 1)
		if n%pageSize == 0 {
			m.pages = append(m.pages, make([]Record, 0, pageSize))
		}
		p := &m.pages[n/pageSize]
		*p = append(*p, r)
		c.Add(r.Sequence, int64(n), uint32(len(r.Data)), r.EventType, r.ContentHash)
	}
	m.seq += uint64(len(out))
	return out, nil
}

// Sync implements Store; memory is as durable as it gets.
func (m *Memory) Sync(ctx context.Context, seq uint64) error { return ctx.Err() }

// Replay implements Store.
func (m *Memory) Replay(ctx context.Context, q Query) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	c := m.chains[q.CorrelationID]
	if c == nil {
		return nil, nil
	}
	from, to := c.Select(q)
	out := make([]Record, 0, to-from)
	for i := from; i < to; i++ {
		n := c.At(i).Loc
		out = append(out, m.pages[n/pageSize][n%pageSize])
	}
	return out, nil
}

// Count implements Store.
func (m *Memory) Count(ctx context.Context, correlationID, eventType string) (int, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if c := m.chains[correlationID]; c != nil {
		return c.Count(eventType), nil
	}
	return 0, nil
}

// LastSequence implements Store.
func (m *Memory) LastSequence() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.seq
}

// Close implements Store.
func (m *Memory) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}
