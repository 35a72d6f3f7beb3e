package evidence

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Memory is an in-memory Store: the reference implementation for tests and
// for hosts that need no durability. Sync is a no-op.
//
// Records are kept encoded, back to back, in large byte arenas rather than
// as Go values, and so is the index: a correlation is a fixed-size,
// pointer-free chain entry (where its id is, its last record, its counts
// by event type) found through a map from a 64-bit hash of its id to the
// entry's number, and each record links to the previous record of its
// chain. The garbage collector scans none of it — neither the arenas nor
// the map nor the chain entries hold pointers — so a million events cost
// little more than their bytes and nothing per collection, and an append
// never moves earlier records.
//
// On Unix the arenas are mapped outside the Go heap (populated by the
// kernel ahead of use), from 64 KiB doubling up to 4 MiB, and unmapped by
// Close — or, for a store dropped without Close, once the garbage collector
// finds it unreachable. The store's growth then does not raise the
// collector's heap goal, which would otherwise let garbage spread over ever
// more fresh memory (measured: twice the page faults of the arenas
// themselves), and no collection ever looks at it. Nothing a caller
// receives points into an arena: records and strings handed out are copies.
type Memory struct {
	// mu guards everything below; a plain mutex, since appends (two per
	// invocation) far outnumber reads, and a read-write lock's write side
	// costs them more.
	mu     sync.Mutex
	closed bool
	seq    uint64
	last   atomic.Uint64 // seq, for LastSequence without the lock
	arenas [][]byte

	seed       maphash.Seed
	allCollide bool              // tests: every id hashes alike
	idx        map[uint64]uint32 // hash of a correlation id → chain number + 1
	dup        map[string]uint32 // an id whose hash an earlier chain holds → chain number + 1
	chains     [][]memChain      // chain n is chains[n>>chainShift][n&chainMask]
	nchain     uint32
	types      map[string]uint16  // interned event types, numbered from 1
	typeNames  []string           // by number (0 unused)
	extra      map[uint64]uint32  // chain<<16 | type → count, beyond a chain's inline counts
	long       map[uint32][]int64 // record locations of chains longer than walkMax

	scratch []memPending // Append's per-record state, reused under mu
	recent  [256]recentChain

	next      []byte // an arena prepared ahead, pages faulted in
	nextSize  int    // the size of the arena to prepare next
	preparing bool   // a goroutine is preparing next
	mapped    *mappedArenas
}

// mappedArenas are the arenas a Memory mapped outside the heap. They are
// kept apart from the Memory so that a cleanup can release them once the
// Memory is unreachable.
type mappedArenas struct {
	mu sync.Mutex
	b  [][]byte
}

// mappedBytes counts the bytes of every arena mapped and not yet released,
// in all stores (tests check that dropped stores give theirs back).
var mappedBytes atomic.Int64

func (a *mappedArenas) add(b []byte) {
	a.mu.Lock()
	a.b = append(a.b, b)
	a.mu.Unlock()
	mappedBytes.Add(int64(cap(b)))
}

func (a *mappedArenas) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, b := range a.b {
		unmapArena(b)
		mappedBytes.Add(-int64(cap(b)))
	}
	a.b = nil
}

// memChain is the index entry of one correlation. It holds no pointers.
type memChain struct {
	name  int64  // location of the correlation id's bytes
	nameN uint32 // their length
	n     uint32 // records
	last  int64  // location of the last record
	typ   [4]uint16
	cnt   [4]uint32
}

const (
	chainShift = 12
	chainMask  = 1<<chainShift - 1
	// walkMax is the chain length up to which Replay walks the chain's
	// links; a longer chain also keeps its record locations in a slice,
	// searched by sequence.
	walkMax = 32
	// A store's first arena has minArena bytes, each next one twice its
	// predecessor's up to maxArena.
	minArena = 64 << 10
	maxArena = 4 << 20
	// minRoom is the space an arena must have left to take a record; a
	// larger record grows its arena.
	minRoom = 8 << 10
	// tailSize is the fixed part of a record's tail (see rec).
	tailSize = 1 + 2 + 8 + 8 + 4
)

// memPending is one record of the batch being appended.
type memPending struct {
	corr  string
	chain uint32 // its chain's number (new chains: numbered from nchain on)
	isNew bool   // the first record of a chain the batch creates
	name  int64  // isNew: where the correlation id was written
	loc   int64
	h     uint64 // hash of corr
	free  bool   // isNew: the index held no chain with hash h at lookup
	typ   uint16
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	m := &Memory{seed: maphash.MakeSeed(), idx: map[uint64]uint32{}, types: map[string]uint16{}, typeNames: []string{""},
		nextSize: minArena, mapped: &mappedArenas{}}
	runtime.AddCleanup(m, (*mappedArenas).release, m.mapped)
	return m
}

// Name implements Store.
func (m *Memory) Name() string { return "memory" }

// A record in an arena, located by the offset just past it (loc = arena
// index << 32 | that offset):
//
//	data | content hash | u8 len(hash) | u16 event type | i64 loc of the
//	chain's previous record (-1: none) | u64 sequence | u32 len(data)
//
// The previous record's content hash is the record's prev hash.
type memRec struct {
	data []byte
	hash string // points into the arena
	typ  uint16
	prev int64
	seq  uint64
}

func (m *Memory) rec(loc int64) memRec {
	a := m.arenas[loc>>32]
	end := int(loc & 0xffffffff)
	t := a[end-tailSize : end]
	r := memRec{
		typ:  binary.LittleEndian.Uint16(t[1:]),
		prev: int64(binary.LittleEndian.Uint64(t[3:])),
		seq:  binary.LittleEndian.Uint64(t[11:]),
	}
	hn := int(t[0])
	dn := int(binary.LittleEndian.Uint32(t[19:]))
	hashAt := end - tailSize - hn
	r.hash = view(a[hashAt : hashAt+hn])
	r.data = a[hashAt-dn : hashAt : hashAt]
	return r
}

// view returns b as a string without copying; b must never change.
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func (m *Memory) prevHash(loc int64) string {
	if loc < 0 {
		return ""
	}
	return m.rec(loc).hash
}

func (m *Memory) chain(n uint32) *memChain { return &m.chains[n>>chainShift][n&chainMask] }

func (m *Memory) hash(id string) uint64 {
	if m.allCollide {
		return 1
	}
	return maphash.String(m.seed, id)
}

// lookup returns the chain number of a correlation.
func (m *Memory) lookup(id string) (uint32, bool) {
	n, found, _ := m.lookupHash(m.hash(id), id)
	return n, found
}

// lookupHash is lookup of an id whose hash is h; free says, when it is not
// found, that no chain holds h in the index. The chains looked up last are
// remembered by hash (recent): an invocation appends to its chain twice
// within microseconds, and the second lookup then skips the map.
func (m *Memory) lookupHash(h uint64, id string) (n uint32, found, free bool) {
	r := &m.recent[h%uint64(len(m.recent))]
	if r.n != 0 && r.h == h {
		if c := m.chain(r.n - 1); m.str(c.name, c.nameN) == id {
			return r.n - 1, true, false
		}
	}
	n, ok := m.idx[h]
	if !ok {
		return 0, false, true
	}
	if c := m.chain(n - 1); m.str(c.name, c.nameN) != id {
		if n, ok = m.dup[id]; !ok {
			return 0, false, false
		}
	}
	*r = recentChain{h: h, n: n}
	return n - 1, true, false
}

// recentChain remembers where the chain of a correlation with hash h is
// (number + 1; 0: empty).
type recentChain struct {
	h uint64
	n uint32
}

// str returns the n bytes at loc (an offset, not an end) as a string view.
func (m *Memory) str(loc int64, n uint32) string {
	off := int(loc & 0xffffffff)
	return view(m.arenas[loc>>32][off : off+int(n)])
}

// room returns the index of an arena with at least n bytes free, taking a
// fresh one when the current one has less than minRoom left.
func (m *Memory) room(n int) int {
	last := len(m.arenas) - 1
	if last < 0 || cap(m.arenas[last])-len(m.arenas[last]) < max(n, minRoom) {
		m.arenas = append(m.arenas, m.takeArena())
		last++
	}
	return last
}

// typeID interns an event type; call with mu held.
func (m *Memory) typeID(t string) (uint16, error) {
	if id, ok := m.types[t]; ok {
		return id, nil
	}
	if len(m.typeNames) > 0xffff {
		return 0, errors.Join(ErrInvalid, errors.New("more than 65535 event types"))
	}
	id := uint16(len(m.typeNames))
	m.types[t] = id
	m.typeNames = append(m.typeNames, t)
	return id, nil
}

// Append implements Store. Each record is sealed straight into the arena.
func (m *Memory) Append(ctx context.Context, batch ...Pending) ([]Record, error) {
	out := make([]Record, 0, len(batch))
	_, err := m.append(ctx, &out, batch)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AppendSeq implements SeqAppender.
func (m *Memory) AppendSeq(ctx context.Context, batch ...Pending) (uint64, error) {
	return m.append(ctx, nil, batch)
}

// append appends batch, adding its records to *dst unless dst is nil, and
// returns the last sequence.
func (m *Memory) append(ctx context.Context, dst *[]Record, batch []Pending) (uint64, error) {
	if err := Validate(batch); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	// Where the batch starts, to undo it if a record fails.
	arenas0, len0 := len(m.arenas), 0
	if arenas0 > 0 {
		len0 = len(m.arenas[arenas0-1])
	}
	fail := func(err error) (uint64, error) {
		m.arenas = m.arenas[:arenas0]
		if arenas0 > 0 {
			m.arenas[arenas0-1] = m.arenas[arenas0-1][:len0]
		}
		clear(m.scratch)
		if dst != nil {
			*dst = (*dst)[:0]
		}
		return 0, err
	}
	sc := m.scratch[:0]
	var inBatch map[string]int // large batches: corr → its last index in sc
	if len(batch) > 16 {
		inBatch = make(map[string]int, len(batch))
	}
	created := uint32(0)
	for i := range batch {
		p := &batch[i]
		r := memPending{corr: p.CorrelationID, name: -1, h: m.hash(p.CorrelationID)}
		prevLoc := int64(-1)
		j := -1
		if inBatch != nil {
			if k, ok := inBatch[p.CorrelationID]; ok {
				j = k
			}
		} else {
			for k := len(sc) - 1; k >= 0; k-- {
				if sc[k].corr == p.CorrelationID {
					j = k
					break
				}
			}
		}
		if j >= 0 {
			r.chain, prevLoc = sc[j].chain, sc[j].loc
		} else if n, ok, free := m.lookupHash(r.h, p.CorrelationID); ok {
			r.chain, prevLoc = n, m.chain(n).last
		} else {
			r.chain, r.isNew, r.free = m.nchain+created, true, free
			created++
			ai := m.room(len(p.CorrelationID))
			a := m.arenas[ai]
			r.name = int64(ai)<<32 | int64(len(a))
			m.arenas[ai] = append(a, p.CorrelationID...)
		}
		var err error
		if r.typ, err = m.typeID(p.EventType); err != nil {
			return fail(err)
		}
		prev := m.prevHash(prevLoc)
		ai := m.room(0)
		a := m.arenas[ai]
		start := len(a)
		seq := m.seq + uint64(i) + 1
		h, a, err := SealAppendHash(a, p, seq, prev)
		if err == nil {
			err = CheckHash(i, h)
		}
		if err == nil && uint64(len(a)-start) > 0xffffffff {
			err = errors.Join(ErrInvalid, errors.New("record larger than 4 GiB"))
		}
		if err != nil {
			return fail(err) // a must not be used; m.arenas[ai] is as it was
		}
		dataN := len(a) - start
		a = append(a, h...)
		a = append(a, byte(len(h)))
		a = binary.LittleEndian.AppendUint16(a, r.typ)
		a = binary.LittleEndian.AppendUint64(a, uint64(prevLoc))
		a = binary.LittleEndian.AppendUint64(a, seq)
		a = binary.LittleEndian.AppendUint32(a, uint32(dataN))
		m.arenas[ai] = a
		r.loc = int64(ai)<<32 | int64(len(a))
		if inBatch != nil {
			inBatch[p.CorrelationID] = len(sc)
		}
		sc = append(sc, r)
		if dst != nil {
			*dst = append(*dst, Record{Sequence: seq, CorrelationID: p.CorrelationID, EventType: p.EventType,
				ContentHash: string(h), PrevHash: strings.Clone(prev), Data: slices.Clone(a[start : start+dataN])})
		}
	}
	// Every record is in place: index them.
	for i := range sc {
		r := &sc[i]
		if r.isNew {
			// A batch creating one chain indexes nothing between its
			// lookup and here.
			m.newChain(r.h, r.corr, r.name, r.free && created == 1)
		}
		c := m.chain(r.chain)
		c.n++
		c.last = r.loc
		m.count(r.chain, c, r.typ)
		if c.n > walkMax {
			locs, ok := m.long[r.chain]
			if !ok {
				locs = m.walk(c.last, 0, int(c.n))
			} else {
				locs = append(locs, r.loc)
			}
			if m.long == nil {
				m.long = map[uint32][]int64{}
			}
			m.long[r.chain] = locs
		}
	}
	m.seq += uint64(len(sc))
	m.last.Store(m.seq)
	clear(sc) // drop the correlation ids
	m.scratch = sc[:0]
	return m.seq, nil
}

// newChain adds the index entry of a new correlation whose id, with hash h,
// is at name. known says the index was just seen without h, and nothing
// has been indexed since: the hash need not be checked before it is taken.
func (m *Memory) newChain(h uint64, id string, name int64, known bool) {
	n := m.nchain
	if int(n>>chainShift) == len(m.chains) {
		m.chains = append(m.chains, make([]memChain, chainMask+1))
	}
	*m.chain(n) = memChain{name: name, nameN: uint32(len(id))}
	m.nchain++
	m.recent[h%uint64(len(m.recent))] = recentChain{h: h, n: n + 1}
	if !known {
		if _, taken := m.idx[h]; taken {
			if m.dup == nil {
				m.dup = map[string]uint32{}
			}
			m.dup[id] = n + 1
			return
		}
	}
	m.idx[h] = n + 1
}

// count adds one record of type t to chain n.
func (m *Memory) count(n uint32, c *memChain, t uint16) {
	for i := range c.typ {
		switch c.typ[i] {
		case t:
			c.cnt[i]++
			return
		case 0:
			c.typ[i], c.cnt[i] = t, 1
			return
		}
	}
	if m.extra == nil {
		m.extra = map[uint64]uint32{}
	}
	m.extra[uint64(n)<<16|uint64(t)]++
}

// walk returns, in ascending order, the locations of the records of the
// chain ending at last whose sequence is above after — at most n of them
// (the newest).
func (m *Memory) walk(last int64, after uint64, n int) []int64 {
	var out []int64
	for loc := last; loc >= 0 && len(out) < n; {
		r := m.rec(loc)
		if r.seq <= after {
			break
		}
		out = append(out, loc)
		loc = r.prev
	}
	slices.Reverse(out)
	return out
}

// takeArena returns a fresh arena, the one prepared in the background when
// there is one, and has the next one prepared; call with mu held. A new
// arena's pages are faulted in outside the lock: touching fresh memory
// inside it made every append wait for the kernel.
func (m *Memory) takeArena() []byte {
	a := m.next
	m.next = nil
	if a == nil {
		a = m.newArena(m.nextSize)
		m.nextSize = min(2*m.nextSize, maxArena)
	}
	if !m.preparing {
		m.preparing = true
		size := m.nextSize
		m.nextSize = min(2*m.nextSize, maxArena)
		go func() {
			b := m.newArena(size)
			m.mu.Lock()
			defer m.mu.Unlock()
			m.preparing = false
			if !m.closed {
				m.next = b
			}
		}()
	}
	return a
}

// newArena returns an empty arena of size bytes, mapped outside the heap
// when the system allows, faulted in.
func (m *Memory) newArena(size int) []byte {
	if b := mapArena(size); b != nil {
		m.mapped.add(b)
		return b[:0]
	}
	b := make([]byte, size)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 0
	}
	return b[:0]
}

// Sync implements Store; memory is as durable as it gets.
func (m *Memory) Sync(ctx context.Context, seq uint64) error { return ctx.Err() }

// Replay implements Store.
func (m *Memory) Replay(ctx context.Context, q Query) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	n, ok := m.lookup(q.CorrelationID)
	if !ok {
		return nil, nil
	}
	c := m.chain(n)
	var locs []int64
	if all, ok := m.long[n]; ok {
		from := sort.Search(len(all), func(i int) bool { return m.rec(all[i]).seq > q.After })
		locs = all[from:]
	} else {
		locs = m.walk(c.last, q.After, int(c.n))
	}
	if q.Limit > 0 && len(locs) > q.Limit {
		locs = locs[:q.Limit]
	}
	if len(locs) == 0 {
		return nil, nil
	}
	out := make([]Record, len(locs))
	for i, loc := range locs {
		r := m.rec(loc)
		out[i] = Record{Sequence: r.seq, CorrelationID: q.CorrelationID, EventType: m.typeNames[r.typ],
			ContentHash: strings.Clone(r.hash), PrevHash: strings.Clone(m.prevHash(r.prev)), Data: slices.Clone(r.data)}
	}
	return out, nil
}

// Count implements Store.
func (m *Memory) Count(ctx context.Context, correlationID, eventType string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	n, ok := m.lookup(correlationID)
	t := m.types[eventType]
	if !ok || t == 0 {
		return 0, nil
	}
	c := m.chain(n)
	for i, ct := range c.typ {
		if ct == t {
			return int(c.cnt[i]), nil
		}
	}
	return int(m.extra[uint64(n)<<16|uint64(t)]), nil
}

// LastSequence implements Store.
func (m *Memory) LastSequence() uint64 { return m.last.Load() }

// Close implements Store. It releases the arenas: the store answers
// ErrClosed from then on.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	m.mapped.release()
	m.arenas, m.next = nil, nil
	return nil
}
