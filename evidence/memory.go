package evidence

import (
	"context"
	"encoding/binary"
	"sync"
)

// Memory is an in-memory Store: the reference implementation for tests and
// for hosts that need no durability. Sync is a no-op.
//
// Records are kept encoded, back to back, in large byte arenas rather than
// as Go values: the garbage collector never scans them (they hold no
// pointers), a million events cost little more than their bytes, and an
// append never moves earlier records. Only the per-correlation index holds
// pointers.
type Memory struct {
	mu     sync.RWMutex
	closed bool
	seq    uint64
	arenas [][]byte
	chains map[string]*Chain
}

const arenaSize = 1 << 20

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
		n := memRecordSize(&r)
		last := len(m.arenas) - 1
		if last < 0 || len(m.arenas[last])+n > cap(m.arenas[last]) {
			m.arenas = append(m.arenas, make([]byte, 0, max(arenaSize, n)))
			last++
		}
		a := &m.arenas[last]
		loc := int64(last)<<32 | int64(len(*a))
		*a = appendMemRecord(*a, &r)
		c := m.chains[r.CorrelationID]
		if c == nil {
			c = &Chain{}
			m.chains[r.CorrelationID] = c
		}
		c.Add(r.Sequence, loc, uint32(n), r.EventType, r.ContentHash)
	}
	m.seq += uint64(len(out))
	return out, nil
}

// A record in an arena: u64 sequence | u16 len + correlation id | u8 len +
// event type | u8 len + content hash | u8 len + prev hash | data. Validate
// and the stores' own limits keep the lengths in range.
func memRecordSize(r *Record) int {
	return 8 + 2 + len(r.CorrelationID) + 3 + len(r.EventType) + len(r.ContentHash) + len(r.PrevHash) + len(r.Data)
}

func appendMemRecord(b []byte, r *Record) []byte {
	b = binary.BigEndian.AppendUint64(b, r.Sequence)
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.CorrelationID)))
	b = append(b, r.CorrelationID...)
	for _, s := range [...]string{r.EventType, r.ContentHash, r.PrevHash} {
		b = append(b, byte(len(s)))
		b = append(b, s...)
	}
	return append(b, r.Data...)
}

func decodeMemRecord(b []byte) Record {
	var r Record
	r.Sequence = binary.BigEndian.Uint64(b)
	n := int(binary.BigEndian.Uint16(b[8:]))
	b = b[10:]
	r.CorrelationID, b = string(b[:n]), b[n:]
	for _, dst := range [...]*string{&r.EventType, &r.ContentHash, &r.PrevHash} {
		n = int(b[0])
		*dst, b = string(b[1:1+n]), b[1+n:]
	}
	r.Data = append([]byte(nil), b...)
	return r
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
		e := c.At(i)
		a := m.arenas[e.Loc>>32]
		off := e.Loc & 0xffffffff
		out = append(out, decodeMemRecord(a[off:off+int64(e.Size)]))
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
