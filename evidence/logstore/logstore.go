// Package logstore is capmesh's durable embedded evidence store: one
// append-only file of checksummed records, an in-memory index rebuilt when the
// file is opened, and group commit — one write(2) and one fsync for all the
// records appended by concurrent callers since the previous commit.
//
// Why not SQLite or an LSM: evidence is written once, never updated and never
// deleted, and read back by correlation. An append-only file does exactly that
// with one write and one fsync per group, where pure-Go SQLite spends tens of
// µs of CPU per row; docs/DECISIONS.md and docs/BENCHMARKS.md have the
// measurements (evidence/sqlite is the engine it is measured against).
//
// Data flow: Append seals the records under the store lock, indexes them and
// copies them into an in-memory buffer (no system call) — they are visible to
// Replay and Count at once. Sync(seq) makes them durable: the first caller
// to arrive becomes the leader, lets goroutines that are still appending
// finish, compresses the buffer (everything appended by anyone so far) into
// blocks, writes them with one write(2) and fdatasyncs, while later callers
// wait for that commit or the next. Appenders compress full blocks of the
// buffer themselves while a commit runs, so a commit mostly writes blocks
// that are ready. Replay of a record not yet written writes the buffer
// first, so every read is a pread of the file. A background extender keeps
// zeros written ahead of the data, so a commit's fdatasync has no
// file-size or extent metadata to journal.
//
// File format (evidence.log, mode 0600 in a 0700 directory): a sequence of
// frames, each
//
//	u32 body length | u32 CRC-32C(body) | body
//	evidence body = u64 sequence | u16 len + correlation id | u8 len + event type |
//	                u8 len + content hash | u8 len + prev hash | data
//	result body   = u64 0 | u8 1 | i64 unix µs | u16 len + invocation id | data
//	gap body      = u64 0 | u8 2 | u64 next sequence | i64 unix µs | note
//	block body    = u64 0 | u8 3 | u8 codec | u32 raw length | compressed records
//
// all integers big-endian; package internal/format encodes and decodes
// them. A block holds whole evidence and result records — frames of the
// kinds above, exactly as version 1 writes them, each with its own CRC —
// compressed together: format version 3
// packs each record's hex (evidence/internal/hexpack) and compresses the
// block with S2, version 2 compressed it with zstd; content hashes are
// over the data each record gives back byte for byte. Version 1 logs hold
// no blocks and, like version 2 logs, read unchanged; Options.Uncompressed
// still writes version 1. Evidence sequences are contiguous from 1, except
// after a gap record (written only by Repair, where damaged records were
// moved aside), after which the sequence resumes at its next sequence; a
// result record (sequence 0: an idempotent-replay result, serving state that
// is never part of a chain, see evidence.ResultStore) may sit anywhere.
// After the last frame come zeros (the space prepared ahead).
//
// Recovery (Open) tells a torn tail from damage. Where a frame is short,
// fails its checksum, is zero, breaks the sequence or is a block that does
// not decompress to records that verify, the scan looks for the next frame
// that verifies (see scan.go). If there is none, the bytes from
// there on are a torn tail — a final write cut short, never acknowledged —
// and are copied to evidence.log.torn-<offset> for inspection and cut off;
// the store carries on from the last good record. If there is one, the log
// is damaged: acknowledged records may be behind the damage, so Open
// refuses the store with a *DamageError (ErrDamaged) and changes nothing.
// Check reports what is damaged and what still verifies; Repair moves the
// damaged bytes aside (evidence.log.damaged-<offset>) and keeps every
// record that verifies.
package logstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/internal/groupcommit"
	"github.com/capmesh/capmesh/evidence/logstore/internal/format"
)

// FileName is the log file inside the store directory.
const FileName = "evidence.log"

// flushAt is the buffer size at which Append writes the buffer itself
// instead of waiting for a Sync, to bound memory.
const flushAt = 1 << 20

// Options configures Open. A nil *Options means defaults.
type Options struct {
	// Logger receives recovery reports. Default: slog.Default().
	Logger *slog.Logger
	// NoSync skips every fsync (benchmarks of the floor and tests only;
	// never in production).
	NoSync bool
	// Uncompressed writes records as version 1 frames, without
	// compression, as releases before format version 2 did (comparison
	// benchmarks and tests). A store holding several formats reads the
	// same.
	Uncompressed bool
}

// Store is the durable evidence store. It is safe for concurrent use.
type Store struct {
	dir  string
	f    *os.File
	log  *slog.Logger
	opts Options

	mu      sync.RWMutex // guards the index, the buffer and the counters below
	closed  bool
	failed  error // a write or fsync failed: nothing more can be promised
	seq     uint64
	end     int64 // logical end (see segment): everything appended
	chains  map[string]*evidence.Chain
	results []resultLoc // result records, in file order
	segs    []segment   // where the logical ranges written are in the file
	pend    []byte      // appended, not yet written
	spare   []byte      // the other buffer, reused
	chain   evidence.BatchChain

	wmu     sync.Mutex   // serializes writes to the file
	written atomic.Int64 // logical offset up to which data has been written
	phys    int64        // file offset where the data written ends (wmu)
	alloc   int64        // file size: written data plus preallocated zeros (wmu)
	zbuf    []byte       // the frames of a write, reused (wmu)

	// Compressed frames not yet written, made by appenders while a commit
	// runs (see precompress); they cover the logical range up to the
	// pending buffer's start. Lock order: wmu, cmu, mu.
	cmu       sync.Mutex
	writers   atomic.Int32 // writes waiting for cmu: precompress stands aside
	ready     []byte
	readySegs []segment // file offsets relative to ready's start
	// block writes a block frame (cmu); nil: format.AppendBlock. Tests set it
	// to write other formats.
	block func(dst, raw []byte) []byte

	extend     chan struct{} // asks the extender for more preallocated space (sent under wmu)
	extStopped bool          // extend is closed (wmu)
	extended   chan struct{} // closed when the extender has stopped

	gc *groupcommit.Committer // file offsets made durable
}

// The file is filled with zeros ahead of the data: fdatasync of a write
// into space that is already allocated and written has no metadata to
// commit (no size change, no extent conversion), which measured about 1.7×
// faster than an appending write on this machine's ext4. Recovery treats
// the zeros as the end of the log. How far ahead grows with the log, from
// minAhead to maxAhead, so a small store stays small.
const (
	minAhead  = 1 << 20
	maxAhead  = 16 << 20
	zeroPiece = 256 << 10
)

// ahead is how much zeroed space the extender keeps after the data.
// Call with wmu held.
func (s *Store) ahead() int64 { return min(maxAhead, max(minAhead, s.phys/4)) }

// extender keeps between ahead/2 and ahead of zeros after the data, writing
// them a piece at a time so that a data write waits for at most one piece.
func (s *Store) extender() {
	defer close(s.extended)
	zeros := make([]byte, zeroPiece)
	for range s.extend {
		grew := false
		for {
			s.wmu.Lock()
			s.mu.RLock()
			failed, closed := s.failed, s.closed
			s.mu.RUnlock()
			if failed != nil || closed || s.alloc-s.phys >= s.ahead() {
				s.wmu.Unlock()
				break
			}
			_, err := s.f.WriteAt(zeros, s.alloc)
			if err == nil {
				s.alloc += int64(len(zeros))
				grew = true
			}
			s.wmu.Unlock()
			if err != nil {
				s.log.Warn("evidence log: preallocation failed; appends extend the file", "err", err)
				break
			}
		}
		if grew && !s.opts.NoSync {
			// The zeros and the new size become durable once, here, so
			// that the data writes into them need no metadata commit.
			_ = datasync(s.f)
		}
	}
}

// resultLoc locates one result record.
type resultLoc struct {
	off  int64 // logical
	size uint32
	at   int64 // unix µs
}

var (
	_ evidence.Store       = (*Store)(nil)
	_ evidence.ResultStore = (*Store)(nil)
)

// Open opens (creating if needed) the store in dir, recovering from a torn
// final write.
func Open(dir string, opts *Options) (*Store, error) {
	s := &Store{dir: dir, chains: map[string]*evidence.Chain{}}
	if opts != nil {
		s.opts = *opts
	}
	s.log = s.opts.Logger
	if s.log == nil {
		s.log = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("logstore: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("logstore: %w", err)
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("logstore: %w", err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("logstore: %s is in use by another process: %w", path, err)
	}
	s.f = f
	if err := s.recover(); err != nil {
		f.Close()
		return nil, err
	}
	if err := s.syncDir(); err != nil {
		f.Close()
		return nil, err
	}
	s.written.Store(s.end)
	s.gc = groupcommit.New(uint64(s.end), s.commit, s.failure)
	if s.alloc < s.phys {
		s.alloc = s.phys
	}
	s.extend = make(chan struct{}, 1)
	s.extended = make(chan struct{})
	if s.opts.NoSync {
		// Without fsync, zeros ahead buy nothing.
		s.extStopped = true
		close(s.extend)
		close(s.extended)
		return s, nil
	}
	go s.extender()
	s.extend <- struct{}{}
	return s, nil
}

// recover scans the file and rebuilds the index, cutting a torn tail. A
// log with damage before records that verify is left untouched: Open fails
// with a *DamageError.
func (s *Store) recover() error {
	st, err := s.f.Stat()
	if err != nil {
		return fmt.Errorf("logstore: %w", err)
	}
	path := filepath.Join(s.dir, FileName)
	res, err := scanLog(s.f, st.Size(), func(fr *frame) error {
		for i := range fr.items {
			switch it := &fr.items[i]; it.kind {
			case kindRecord:
				s.index(it.rec, it.loc, uint32(it.size))
			case kindResult:
				s.results = append(s.results, resultLoc{off: it.loc, size: uint32(it.size), at: it.at})
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("logstore: reading %s: %w", path, err)
	}
	if len(res.damaged) > 0 {
		return &DamageError{Path: path, Damaged: res.damaged, Tail: res.tail}
	}
	s.seq = res.next - 1 // past a final gap record too
	s.end, s.phys, s.alloc, s.segs = res.lend, res.end, st.Size(), res.segs
	if res.tail == nil {
		return nil
	}
	return s.cutTail(res.tail)
}

// cutTail ends the log at the torn tail t: its non-zero bytes are
// preserved in evidence.log.torn-<offset>, then everything from its offset
// on is removed — also any stale piece of a write that was never
// acknowledged, so nothing written before a crash can reappear after later
// appends.
func (s *Store) cutTail(t *Tail) error {
	keep, err := preserve(s.dir, fmt.Sprintf("%s.torn-%d", FileName, t.Offset), io.NewSectionReader(s.f, t.Offset, t.Length), !s.opts.NoSync)
	if err != nil {
		return err
	}
	s.log.Warn("evidence log ended in a torn record (a write cut short); cut it off",
		"path", filepath.Join(s.dir, FileName), "offset", t.Offset, "bytes", t.Length, "reason", t.Reason,
		"preserved_in", keep, "last_sequence", s.seq)
	s.phys, s.alloc = t.Offset, t.Offset
	if err := s.f.Truncate(t.Offset); err != nil {
		return fmt.Errorf("logstore: truncating the tail: %w", err)
	}
	if s.opts.NoSync {
		return nil
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("logstore: %w", err)
	}
	return nil
}

func (s *Store) index(r evidence.Record, off int64, size uint32) {
	c := s.chains[r.CorrelationID]
	if c == nil {
		c = &evidence.Chain{}
		s.chains[r.CorrelationID] = c
	}
	c.Add(r.Sequence, off, size, r.EventType, r.ContentHash)
	s.seq = r.Sequence
}

// Name implements evidence.Store.
func (s *Store) Name() string { return "logstore" }

// usable reports why the store cannot take appends; call with mu held.
func (s *Store) usable() error {
	if s.closed {
		return evidence.ErrClosed
	}
	return s.failed
}

// Append implements evidence.Store. It performs no I/O unless the buffer
// has grown past its bound.
func (s *Store) Append(ctx context.Context, batch ...evidence.Pending) ([]evidence.Record, error) {
	if err := evidence.Validate(batch); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if err := s.usable(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	mark := len(s.pend)
	out, err := s.sealInto(batch)
	if err != nil {
		s.pend = s.pend[:mark]
		s.mu.Unlock()
		return nil, err
	}
	off := s.end
	for i := range out {
		n := format.RecordSize(&out[i])
		s.index(out[i], off, uint32(n))
		off += int64(n)
	}
	s.end = off
	big, pre := s.bound()
	s.mu.Unlock()
	if big {
		if err := s.write(); err != nil {
			return nil, err
		}
	} else if pre {
		s.precompress()
	}
	return out, nil
}

// bound says whether what is appended and not written has grown past its
// bound (write it now), or whether the buffer holds a block's worth to
// compress; call with mu held.
func (s *Store) bound() (big, pre bool) {
	big = s.end-s.written.Load() >= flushAt
	return big, !big && !s.opts.Uncompressed && len(s.pend) >= format.BlockTarget
}

// precompress compresses the buffer into frames ready for the next write,
// unless another goroutine is compressing. Appenders run it while a
// commit's write and fsync are under way, so that the next commit finds
// its data mostly compressed: compression is spread over the callers
// instead of lengthening every commit.
func (s *Store) precompress() {
	if s.writers.Load() > 0 || !s.cmu.TryLock() {
		return
	}
	defer s.cmu.Unlock()
	s.mu.Lock()
	cut := format.BlockCut(s.pend)
	if cut == 0 || s.failed != nil {
		s.mu.Unlock()
		return
	}
	// Whole blocks only: the rest stays buffered to fill the next one.
	buf, start := s.pend, s.end-int64(len(s.pend))
	s.pend = append(s.spare[:0], buf[cut:]...)
	s.spare = nil
	s.mu.Unlock()
	s.frame(buf[:cut], start)
	s.mu.Lock()
	s.givePend(buf)
	s.mu.Unlock()
}

// takePend takes the buffer and its logical start, leaving an empty one;
// call with mu held.
func (s *Store) takePend() ([]byte, int64) {
	buf := s.pend
	s.pend = s.spare[:0]
	s.spare = nil
	return buf, s.end - int64(len(buf))
}

// givePend hands a buffer taken by takePend back for reuse; call with mu
// held.
func (s *Store) givePend(buf []byte) {
	if s.spare == nil && cap(buf) <= 2*flushAt {
		s.spare = buf[:0]
	}
}

// frame compresses buf, whole records from logical offset start, into
// the ready frames; call with cmu held.
func (s *Store) frame(buf []byte, start int64) {
	block := s.block
	if block == nil {
		block = format.AppendBlock
	}
	s.ready = format.Compress(s.ready, buf, block, func(rawOff, rawLen, off, n int, block bool) {
		g := segment{l: start + int64(rawOff), p: int64(off), n: int64(rawLen)}
		if block {
			g.frame = int64(n)
		}
		s.readySegs = append(s.readySegs, g)
	})
}

// sealInto seals the batch straight into the buffer, each record in its
// final encoding; call with mu held. The records' Data alias the buffer.
func (s *Store) sealInto(batch []evidence.Pending) ([]evidence.Record, error) {
	out := make([]evidence.Record, len(batch))
	s.chain.Reset(len(batch))
	for i := range batch {
		p := &batch[i]
		prev, ok := s.chain.Prev(p.CorrelationID)
		if !ok {
			if c := s.chains[p.CorrelationID]; c != nil {
				prev = c.Head
			}
		}
		r := evidence.Record{Sequence: s.seq + uint64(i) + 1, CorrelationID: p.CorrelationID, EventType: p.EventType, PrevHash: prev}
		// Header and body up to the data, with room for a 64-digit hash
		// (what every sealer capmesh has produces); another length is
		// re-encoded below.
		start := len(s.pend)
		r.ContentHash = placeholderHash
		var err error
		if s.pend, err = format.AppendRecord(s.pend, &r); err != nil {
			return nil, err
		}
		dataAt := len(s.pend)
		h, buf, err := evidence.SealAppend(s.pend, p, r.Sequence, prev)
		if err == nil {
			s.pend = buf
			err = evidence.CheckHash(i, h)
		}
		if err == nil && len(r.Data)+len(s.pend)-dataAt > format.MaxBody-1024 {
			err = fmt.Errorf("%w: record of %d bytes is too large", evidence.ErrInvalid, len(s.pend)-dataAt)
		}
		if err != nil {
			return nil, err
		}
		r.ContentHash = h
		if len(h) == len(placeholderHash) {
			copy(s.pend[dataAt-len(prev)-1-len(h):], h) // the hash slot
		} else {
			r.Data = append([]byte(nil), s.pend[dataAt:]...)
			s.pend = s.pend[:start]
			if s.pend, err = format.AppendRecord(s.pend, &r); err != nil {
				return nil, err
			}
			dataAt = len(s.pend) - len(r.Data)
		}
		format.Seal(s.pend[start:])
		r.Data = s.pend[dataAt:len(s.pend):len(s.pend)]
		s.chain.Add(p.CorrelationID, h)
		out[i] = r
	}
	return out, nil
}

// placeholderHash holds the place of a content hash while its record is
// sealed.
var placeholderHash = string(make([]byte, 64))

// PutResult implements evidence.ResultStore: the result is buffered like an
// append and becomes durable with the next Sync.
func (s *Store) PutResult(ctx context.Context, r evidence.Result) error {
	if r.InvocationID == "" {
		return fmt.Errorf("%w: result without invocation id", evidence.ErrInvalid)
	}
	s.mu.Lock()
	if err := s.usable(); err != nil {
		s.mu.Unlock()
		return err
	}
	mark := len(s.pend)
	var err error
	if s.pend, err = format.AppendResult(s.pend, &r); err != nil {
		s.mu.Unlock()
		return err
	}
	n := len(s.pend) - mark
	s.results = append(s.results, resultLoc{off: s.end, size: uint32(n), at: r.At.UnixMicro()})
	s.end += int64(n)
	big, pre := s.bound()
	s.mu.Unlock()
	if big {
		return s.write()
	}
	if pre {
		s.precompress()
	}
	return nil
}

// Results implements evidence.ResultStore: newest first.
func (s *Store) Results(ctx context.Context, since time.Time, fn func(evidence.Result) bool) error {
	s.mu.RLock()
	locs := make([]resultLoc, 0, len(s.results))
	from := since.UnixMicro()
	for i := len(s.results) - 1; i >= 0; i-- {
		if s.results[i].at >= from {
			locs = append(locs, s.results[i])
		}
	}
	end := s.end
	s.mu.RUnlock()
	if len(locs) == 0 {
		return nil
	}
	if err := s.writeUpTo(end); err != nil {
		return err
	}
	rd := newReader(s)
	defer rd.close()
	for _, l := range locs {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.mu.RLock()
		g, ok := s.segmentAt(l.off)
		s.mu.RUnlock()
		if !ok {
			return fmt.Errorf("logstore: result at logical offset %d is in no segment written", l.off)
		}
		body, err := rd.record(g, l.off, l.size)
		if err != nil {
			return err
		}
		r, err := format.DecodeResult(body)
		if err != nil {
			return fmt.Errorf("logstore: result at %d: %w", l.off, err)
		}
		if !fn(r) {
			return nil
		}
	}
	return nil
}

// write writes the buffer to the file: as blocks (see format.Compress) after
// the frames precompress made ready, or uncompressed with
// Options.Uncompressed.
func (s *Store) write() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.writers.Add(1)
	s.cmu.Lock()
	s.writers.Add(-1)
	s.mu.Lock()
	if len(s.pend) == 0 && len(s.ready) == 0 {
		s.mu.Unlock()
		s.cmu.Unlock()
		return nil
	}
	if s.failed != nil {
		s.mu.Unlock()
		s.cmu.Unlock()
		return s.failed
	}
	end := s.end
	buf, start := s.takePend()
	s.mu.Unlock()
	var out []byte
	var placed []segment
	if s.opts.Uncompressed {
		out, placed = buf, []segment{{l: start, n: int64(len(buf))}}
	} else {
		s.frame(buf, start)
		out, placed = s.ready, s.readySegs
		s.ready, s.readySegs = s.zbuf[:0], nil
		s.zbuf = nil
		s.mu.Lock()
		s.givePend(buf)
		s.mu.Unlock()
	}
	s.cmu.Unlock() // appenders may compress the next commit's data meanwhile
	_, err := s.f.WriteAt(out, s.phys)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		// The file now ends in an unknown state and records already handed
		// out cannot be un-appended: refuse every later promise. Recovery at
		// the next open cuts the torn tail.
		s.failed = fmt.Errorf("logstore: write: %w", err)
		return s.failed
	}
	for _, g := range placed {
		g.p += s.phys
		if g.block() {
			s.segs = append(s.segs, g)
		} else {
			s.segs = addRun(s.segs, g.l, g.p, g.n)
		}
	}
	s.phys += int64(len(out))
	s.written.Store(end)
	if s.phys > s.alloc {
		s.alloc = s.phys
	}
	if s.alloc-s.phys < s.ahead()/2 && !s.extStopped {
		select {
		case s.extend <- struct{}{}:
		default:
		}
	}
	if s.opts.Uncompressed {
		s.givePend(buf)
	} else if cap(out) <= 2*flushAt {
		s.zbuf = out[:0]
	}
	return nil
}

// writeUpTo makes sure the file holds every byte before off.
func (s *Store) writeUpTo(off int64) error {
	if s.written.Load() >= off {
		return nil
	}
	return s.write()
}

// Sync implements evidence.Store with group commit: it returns once every
// record and result appended before the call is durable. The first caller
// writes and fsyncs everything appended so far while later callers wait for
// it (or the next one).
func (s *Store) Sync(ctx context.Context, seq uint64) error {
	s.mu.RLock()
	target, failed := s.end, s.failed
	s.mu.RUnlock()
	if failed != nil {
		return failed
	}
	return s.gc.Sync(ctx, uint64(target))
}

// commit is the group commit's leader: it writes everything buffered and
// fdatasyncs, and returns the file offset now durable.
func (s *Store) commit() (uint64, error) {
	s.gather()
	err := s.write()
	covered := uint64(s.written.Load())
	if err == nil && !s.opts.NoSync {
		if err = datasync(s.f); err != nil {
			// fsync failure leaves the page cache state unknown; refuse
			// every later durability promise (the fsyncgate lesson).
			err = fmt.Errorf("logstore: fsync: %w", err)
			s.mu.Lock()
			s.failed = err
			s.mu.Unlock()
		}
	}
	return covered, err
}

// failure is why the store can no longer promise durability, or nil.
func (s *Store) failure() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.failed
}

// gather lets a commit pick up the appends of callers that are about to
// sync (the idea of PostgreSQL's commit_delay): while other goroutines are
// still appending, the leader yields its processor to them, a few times at
// most. A lone caller finds nothing new at the first look and commits at
// once; under load a commit carries many invocations instead of the one or
// two that happened to be ready, and fsyncs — a fixed cost each — go down.
func (s *Store) gather() {
	if s.opts.NoSync {
		return
	}
	s.mu.RLock()
	last := s.end
	s.mu.RUnlock()
	for range maxGather {
		runtime.Gosched()
		s.mu.RLock()
		end := s.end
		s.mu.RUnlock()
		if end == last {
			return
		}
		last = end
	}
}

// maxGather bounds the yields of gather.
const maxGather = 8

// Replay implements evidence.Store.
func (s *Store) Replay(ctx context.Context, q evidence.Query) ([]evidence.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, evidence.ErrClosed
	}
	c := s.chains[q.CorrelationID]
	if c == nil {
		s.mu.RUnlock()
		return nil, nil
	}
	from, to := c.Select(q)
	ents := make([]evidence.ChainEntry, to-from)
	for i := range ents {
		ents[i] = c.At(from + i)
	}
	s.mu.RUnlock()
	if len(ents) == 0 {
		return nil, nil
	}
	last := ents[len(ents)-1]
	if err := s.writeUpTo(last.Loc + int64(last.Size)); err != nil {
		return nil, err
	}
	segs, err := s.segmentsOf(ents)
	if err != nil {
		return nil, err
	}
	out := make([]evidence.Record, 0, len(ents))
	rd := newReader(s)
	defer rd.close()
	for i := 0; i < len(ents); {
		var bodies [][]byte
		var err error
		bodies, i, err = s.readRun(rd, ents, segs, i)
		if err != nil {
			return nil, err
		}
		for k, body := range bodies {
			e := ents[i-len(bodies)+k]
			rec, err := format.DecodeRecord(body)
			if err == nil && (rec.Sequence != e.Seq || rec.CorrelationID != q.CorrelationID) {
				err = fmt.Errorf("%w: record at %d is not sequence %d of %s", ErrDamaged, e.Loc, e.Seq, q.CorrelationID)
			}
			if err != nil {
				return nil, fmt.Errorf("logstore: record at %d: %w", e.Loc, err)
			}
			out = append(out, rec)
		}
	}
	return out, nil
}

// segmentsOf returns the segment of each entry (all written).
func (s *Store) segmentsOf(ents []evidence.ChainEntry) ([]segment, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	segs := make([]segment, len(ents))
	for i, e := range ents {
		g, ok := s.segmentAt(e.Loc)
		if !ok {
			return nil, fmt.Errorf("logstore: record at logical offset %d is in no segment written", e.Loc)
		}
		segs[i] = g
	}
	return segs, nil
}

// readRun reads, verified, the body of ents[i] and of the entries after
// it in the same block, or, from an uncompressed run, adjacent in the
// file (one pread, up to 1 MiB); it returns them and the index after
// them.
func (s *Store) readRun(rd *reader, ents []evidence.ChainEntry, segs []segment, i int) ([][]byte, int, error) {
	g := segs[i]
	j := i + 1
	if g.block() {
		for j < len(ents) && segs[j] == g {
			j++
		}
		bodies, err := rd.blockRecords(g, ents[i:j])
		return bodies, j, err
	}
	end := ents[i].Loc + int64(ents[i].Size)
	for j < len(ents) && segs[j] == g && ents[j].Loc == end && end-ents[i].Loc < 1<<20 {
		end += int64(ents[j].Size)
		j++
	}
	off := g.p + ents[i].Loc - g.l
	buf := make([]byte, end-ents[i].Loc)
	if _, err := s.f.ReadAt(buf, off); err != nil {
		return nil, 0, fmt.Errorf("logstore: replay read at %d: %w", off, err)
	}
	bodies := make([][]byte, 0, j-i)
	for k := i; k < j; k++ {
		n := ents[k].Size
		body, err := s.verified(buf[:n], off)
		if err != nil {
			return nil, 0, err
		}
		bodies = append(bodies, body)
		buf, off = buf[n:], off+int64(n)
	}
	return bodies, j, nil
}

// verified checks the record rec, read back from off, against its header
// and returns its body. A mismatch means the file changed under the store
// (damage since it was opened): an error wrapping ErrDamaged, never the
// damaged bytes.
func (s *Store) verified(rec []byte, off int64) ([]byte, error) {
	body := rec[format.HeaderSize:]
	if int(binary.BigEndian.Uint32(rec)) != len(body) || binary.BigEndian.Uint32(rec[4:]) != format.Checksum(body) {
		return nil, fmt.Errorf("%w: the record at offset %d of %s no longer verifies; stop the host and run `capmesh evidence check %s`",
			ErrDamaged, off, filepath.Join(s.dir, FileName), s.dir)
	}
	return body, nil
}

// Count implements evidence.Store.
func (s *Store) Count(ctx context.Context, correlationID, eventType string) (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, evidence.ErrClosed
	}
	if c := s.chains[correlationID]; c != nil {
		return c.Count(eventType), nil
	}
	return 0, nil
}

// LastSequence implements evidence.Store.
func (s *Store) LastSequence() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.seq
}

// Close writes and syncs what is buffered, and closes the file. Appends
// after Close fail with evidence.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true // no more appends; the buffer is complete
	s.mu.Unlock()
	werr := s.write()
	s.wmu.Lock()
	if !s.extStopped {
		s.extStopped = true
		close(s.extend)
	}
	s.wmu.Unlock()
	<-s.extended
	s.wmu.Lock()
	defer s.wmu.Unlock()
	var err error
	if !s.opts.NoSync {
		err = s.f.Sync()
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	if werr != nil {
		return werr
	}
	return err
}

// syncDir makes the store directory's entries durable, unless NoSync.
func (s *Store) syncDir() error {
	if s.opts.NoSync {
		return nil
	}
	return syncDir(s.dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("logstore: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("logstore: sync dir: %w", err)
	}
	return nil
}
