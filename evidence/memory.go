package evidence

import (
	"context"
	"sync"
)

// Memory is an in-memory Store: the reference implementation for tests and
// for hosts that need no durability. Sync is a no-op.
type Memory struct {
	mu      sync.RWMutex
	closed  bool
	seq     uint64
	records []Record // index = sequence-1
	chains  map[string]*Chain
}

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
	out := make([]Record, 0, len(batch))
	heads := map[string]string{}
	for i, p := range batch {
		prev, ok := heads[p.CorrelationID]
		if !ok {
			if c := m.chains[p.CorrelationID]; c != nil {
				prev = c.Head
			}
		}
		seq := m.seq + uint64(i) + 1
		h, data, err := p.Seal(seq, prev)
		if err != nil {
			return nil, err
		}
		heads[p.CorrelationID] = h
		out = append(out, Record{Sequence: seq, CorrelationID: p.CorrelationID, EventType: p.EventType, ContentHash: h, PrevHash: prev, Data: data})
	}
	for _, r := range out {
		c := m.chains[r.CorrelationID]
		if c == nil {
			c = &Chain{}
			m.chains[r.CorrelationID] = c
		}
		c.Add(r.Sequence, int64(len(m.records)), uint32(len(r.Data)), r.EventType, r.ContentHash)
		m.records = append(m.records, r)
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
		out = append(out, m.records[c.Locs[i]])
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
