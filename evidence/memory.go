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
	chain  BatchChain // scratch for Append

	next      []byte // an arena prepared ahead, pages faulted in
	preparing bool
}

const arenaSize = 1 << 20

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory { return &Memory{chains: map[string]*Chain{}} }

// Name implements Store.
func (m *Memory) Name() string { return "memory" }

// Append implements Store. Each record is sealed straight into the arena.
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
	// Where the batch starts, to undo it if a record fails.
	arenas0, len0 := len(m.arenas), 0
	if arenas0 > 0 {
		len0 = len(m.arenas[arenas0-1])
	}
	undo := func() {
		m.arenas = m.arenas[:arenas0]
		if arenas0 > 0 {
			m.arenas[arenas0-1] = m.arenas[arenas0-1][:len0]
		}
	}
	out := make([]Record, len(batch))
	locs := make([]ChainEntry, len(batch))
	m.chain.Reset(len(batch))
	for i := range batch {
		p := &batch[i]
		prev, ok := m.chain.Prev(p.CorrelationID)
		if !ok {
			if c := m.chains[p.CorrelationID]; c != nil {
				prev = c.Head
			}
		}
		last := len(m.arenas) - 1
		if last < 0 || cap(m.arenas[last])-len(m.arenas[last]) < minRoom {
			m.arenas = append(m.arenas, m.takeArena())
			last++
		}
		a := m.arenas[last]
		start := len(a)
		seq := m.seq + uint64(i) + 1
		h, a, err := SealAppend(a, p, seq, prev)
		if err == nil {
			err = CheckHash(i, h)
		}
		if err != nil {
			undo()
			return nil, err
		}
		end := len(a)
		for _, s := range [...]string{p.EventType, h, prev} {
			a = append(a, byte(len(s)))
			a = append(a, s...)
		}
		a = binary.BigEndian.AppendUint32(a, uint32(end-start))
		m.arenas[last] = a
		m.chain.Add(p.CorrelationID, h)
		out[i] = Record{Sequence: seq, CorrelationID: p.CorrelationID, EventType: p.EventType, ContentHash: h, PrevHash: prev, Data: a[start:end:end]}
		locs[i] = ChainEntry{Seq: seq, Loc: int64(last)<<32 | int64(start), Size: uint32(len(a) - start)}
	}
	for i, r := range out {
		c := m.chains[r.CorrelationID]
		if c == nil {
			c = &Chain{}
			m.chains[r.CorrelationID] = c
		}
		c.Add(r.Sequence, locs[i].Loc, locs[i].Size, r.EventType, r.ContentHash)
	}
	m.seq += uint64(len(out))
	return out, nil
}

// takeArena returns a fresh arena, the one prepared in the background when
// there is one, and has the next one prepared; call with mu held. A new
// arena's pages are faulted in outside the lock: touching fresh memory
// inside it made every append wait for the kernel.
func (m *Memory) takeArena() []byte {
	a := m.next
	m.next = nil
	if a == nil {
		a = make([]byte, 0, arenaSize)
	}
	if !m.preparing {
		m.preparing = true
		go func() {
			b := make([]byte, arenaSize)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 0
			}
			m.mu.Lock()
			m.next, m.preparing = b[:0], false
			m.mu.Unlock()
		}()
	}
	return a
}

// minRoom is the space an arena must have left to take a record; a larger
// record grows its arena.
const minRoom = 8 << 10

// A record in an arena: data | u8 len + event type | u8 len + content hash
// | u8 len + prev hash | u32 len(data). The correlation id is the chain's
// key and the sequence is in the chain's entry.
func decodeMemRecord(b []byte, corr string, seq uint64) Record {
	r := Record{Sequence: seq, CorrelationID: corr}
	n := int(binary.BigEndian.Uint32(b[len(b)-4:]))
	r.Data = append([]byte(nil), b[:n]...)
	meta := b[n : len(b)-4]
	for _, dst := range [...]*string{&r.EventType, &r.ContentHash, &r.PrevHash} {
		k := int(meta[0])
		*dst, meta = string(meta[1:1+k]), meta[1+k:]
	}
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
		out = append(out, decodeMemRecord(a[off:off+int64(e.Size)], q.CorrelationID, e.Seq))
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
