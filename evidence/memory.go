package evidence

import (
	"context"
	"slices"
	"sync"
)

// Memory is an in-memory Store: the reference implementation for tests and
// for hosts that need no durability. Sync is a no-op. It keeps every record
// as a Go value in one slice and indexes each correlation with a Chain
// whose locators are positions in that slice; SealBatch seals and chains
// an appended batch, so a batch whose sealing fails leaves nothing behind.
type Memory struct {
	mu     sync.Mutex // guards everything below
	closed bool
	recs   []Record
	chains map[string]*Chain
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory { return &Memory{chains: make(map[string]*Chain)} }

// Name implements Store.
func (m *Memory) Name() string { return "memory" }

// Append implements Store.
func (m *Memory) Append(ctx context.Context, batch ...Pending) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := Validate(batch); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	out, err := SealBatch(uint64(len(m.recs)), batch, func(id string) string {
		if c := m.chains[id]; c != nil {
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
			c = new(Chain)
			m.chains[r.CorrelationID] = c
		}
		c.Add(r.Sequence, int64(len(m.recs)), uint32(len(r.Data)), r.EventType, r.ContentHash)
		m.recs = append(m.recs, r)
	}
	return out, nil
}

// Sync implements Store; memory is as durable as it gets.
func (m *Memory) Sync(ctx context.Context, seq uint64) error { return ctx.Err() }

// Replay implements Store. The records' Data are copies.
func (m *Memory) Replay(ctx context.Context, q Query) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	c := m.chains[q.CorrelationID]
	if c == nil {
		return nil, nil
	}
	from, to := c.Select(q)
	if from == to {
		return nil, nil
	}
	out := make([]Record, 0, to-from)
	for i := from; i < to; i++ {
		r := m.recs[c.At(i).Loc]
		r.Data = slices.Clone(r.Data)
		out = append(out, r)
	}
	return out, nil
}

// Count implements Store.
func (m *Memory) Count(ctx context.Context, correlationID, eventType string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	if c := m.chains[correlationID]; c != nil {
		return c.Count(eventType), nil
	}
	return 0, nil
}

// LastSequence implements Store.
func (m *Memory) LastSequence() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return uint64(len(m.recs))
}

// Close implements Store. It drops the records: the store answers
// ErrClosed from then on.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.recs, m.chains = nil, nil
	return nil
}
