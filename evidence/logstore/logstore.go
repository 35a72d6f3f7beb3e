// Package logstore is capmesh's durable embedded evidence store: one
// append-only file of checksummed records, an in-memory index rebuilt when the
// file is opened, and group commit — concurrent Syncs share one fsync.
//
// Why not SQLite or an LSM: evidence is written once, never updated and never
// deleted, and read back by correlation. An append-only file does exactly that
// with one write(2) per append and one fsync per group, where pure-Go SQLite
// spends ~20 µs of CPU per row; docs/DECISIONS.md has the measurements.
//
// File format (evidence.log, mode 0600 in a 0700 directory): a sequence of
// records, each
//
//	u32 body length | u32 CRC-32C(body) | body
//	body = u64 sequence | u16 len + correlation id | u8 len + event type |
//	       u8 len + content hash | u8 len + prev hash | data
//
// all integers big-endian. Sequences are contiguous from 1. On open the file
// is scanned; the first record that is short, fails its checksum or breaks the
// sequence ends the log: the bytes from there on (a torn final write) are
// copied to evidence.log.torn-<offset> for inspection and cut off, and the
// store carries on from the last good record. Only records that were never
// reported durable can be lost that way.
package logstore

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/capmesh/capmesh/evidence"
)

// FileName is the log file inside the store directory.
const FileName = "evidence.log"

const (
	headerSize = 8
	// maxBody bounds one record (corrupt length fields must not make us
	// allocate gigabytes).
	maxBody = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Options configures Open. A nil *Options means defaults.
type Options struct {
	// Logger receives recovery reports. Default: slog.Default().
	Logger *slog.Logger
	// NoSync skips fsync (benchmarks of the floor only; never in production).
	NoSync bool
}

// Store is the durable evidence store. It is safe for concurrent use.
type Store struct {
	dir  string
	f    *os.File
	log  *slog.Logger
	opts Options

	mu     sync.RWMutex // guards everything below and file appends
	closed bool
	size   int64
	seq    uint64
	chains map[string]*evidence.Chain
	buf    []byte

	written atomic.Uint64 // highest sequence written to the file

	smu     sync.Mutex // group commit
	synced  uint64
	syncing bool
	syncErr error
	done    chan struct{}
}

var _ evidence.Store = (*Store)(nil)

// Open opens (creating if needed) the store in dir, recovering from a torn
// final write.
func Open(dir string, opts *Options) (*Store, error) {
	s := &Store{dir: dir, chains: map[string]*evidence.Chain{}, done: make(chan struct{})}
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
	if _, err := f.Seek(s.size, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("logstore: %w", err)
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	s.written.Store(s.seq)
	s.synced = s.seq
	return s, nil
}

// recover scans the file and rebuilds the index, cutting a torn tail.
func (s *Store) recover() error {
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	st, err := s.f.Stat()
	if err != nil {
		return err
	}
	total := st.Size()
	r := bufio.NewReaderSize(s.f, 1<<20)
	var off int64
	var hdr [headerSize]byte
	body := make([]byte, 0, 4096)
	for off < total {
		bad := ""
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			bad = "short header"
		} else {
			n := binary.BigEndian.Uint32(hdr[0:4])
			sum := binary.BigEndian.Uint32(hdr[4:8])
			switch {
			case n > maxBody || int64(n) > total-off-headerSize:
				bad = "short or oversized body"
			default:
				body = body[:0]
				if cap(body) < int(n) {
					body = make([]byte, n)
				}
				body = body[:n]
				if _, err := io.ReadFull(r, body); err != nil {
					bad = "short body"
				} else if crc32.Checksum(body, castagnoli) != sum {
					bad = "checksum mismatch"
				} else if rec, err := decodeBody(body); err != nil {
					bad = err.Error()
				} else if rec.Sequence != s.seq+1 {
					bad = fmt.Sprintf("sequence %d after %d", rec.Sequence, s.seq)
				} else {
					s.index(rec, off, uint32(headerSize+n))
					off += headerSize + int64(n)
					continue
				}
			}
		}
		return s.cutTail(off, total, bad)
	}
	s.size = off
	return nil
}

// cutTail preserves and removes everything from off to the end of the file.
func (s *Store) cutTail(off, total int64, why string) error {
	tail := make([]byte, total-off)
	if _, err := s.f.ReadAt(tail, off); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("logstore: reading torn tail: %w", err)
	}
	keep := filepath.Join(s.dir, fmt.Sprintf("%s.torn-%d", FileName, off))
	if err := os.WriteFile(keep, tail, 0o600); err != nil {
		return fmt.Errorf("logstore: preserving torn tail: %w", err)
	}
	if err := s.f.Truncate(off); err != nil {
		return fmt.Errorf("logstore: truncating torn tail: %w", err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("logstore: %w", err)
	}
	s.log.Warn("evidence log ended in a torn or corrupt record; cut it off",
		"path", filepath.Join(s.dir, FileName), "offset", off, "bytes", total-off, "reason", why,
		"preserved_in", keep, "last_sequence", s.seq)
	s.size = off
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

func appendBody(dst []byte, r *evidence.Record) ([]byte, error) {
	if len(r.CorrelationID) > 0xffff || len(r.EventType) > 0xff || len(r.ContentHash) > 0xff || len(r.PrevHash) > 0xff {
		return dst, fmt.Errorf("%w: correlation id, event type or hash too long", evidence.ErrInvalid)
	}
	if len(r.Data) > maxBody-1024 {
		return dst, fmt.Errorf("%w: record of %d bytes is too large", evidence.ErrInvalid, len(r.Data))
	}
	start := len(dst)
	dst = append(dst, make([]byte, headerSize)...)
	dst = binary.BigEndian.AppendUint64(dst, r.Sequence)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(r.CorrelationID)))
	dst = append(dst, r.CorrelationID...)
	dst = append(dst, byte(len(r.EventType)))
	dst = append(dst, r.EventType...)
	dst = append(dst, byte(len(r.ContentHash)))
	dst = append(dst, r.ContentHash...)
	dst = append(dst, byte(len(r.PrevHash)))
	dst = append(dst, r.PrevHash...)
	dst = append(dst, r.Data...)
	body := dst[start+headerSize:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(body, castagnoli))
	return dst, nil
}

var errShort = errors.New("record body too short")

func decodeBody(b []byte) (evidence.Record, error) {
	var r evidence.Record
	if len(b) < 10 {
		return r, errShort
	}
	r.Sequence = binary.BigEndian.Uint64(b)
	n := int(binary.BigEndian.Uint16(b[8:]))
	b = b[10:]
	if len(b) < n {
		return r, errShort
	}
	r.CorrelationID, b = string(b[:n]), b[n:]
	for _, dst := range []*string{&r.EventType, &r.ContentHash, &r.PrevHash} {
		if len(b) < 1 || len(b) < 1+int(b[0]) {
			return r, errShort
		}
		n = int(b[0])
		*dst, b = string(b[1:1+n]), b[1+n:]
	}
	r.Data = b
	return r, nil
}

// Name implements evidence.Store.
func (s *Store) Name() string { return "logstore" }

// Append implements evidence.Store: one write(2) per batch.
func (s *Store) Append(ctx context.Context, batch ...evidence.Pending) ([]evidence.Record, error) {
	if err := evidence.Validate(batch); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, evidence.ErrClosed
	}
	out := make([]evidence.Record, 0, len(batch))
	var heads map[string]string
	buf := s.buf[:0]
	for i, p := range batch {
		prev := ""
		if h, ok := heads[p.CorrelationID]; ok {
			prev = h
		} else if c := s.chains[p.CorrelationID]; c != nil {
			prev = c.Head
		}
		seq := s.seq + uint64(i) + 1
		h, data, err := p.Seal(seq, prev)
		if err != nil {
			return nil, err
		}
		if len(batch) > 1 {
			if heads == nil {
				heads = map[string]string{}
			}
			heads[p.CorrelationID] = h
		}
		rec := evidence.Record{Sequence: seq, CorrelationID: p.CorrelationID, EventType: p.EventType, ContentHash: h, PrevHash: prev, Data: data}
		if buf, err = appendBody(buf, &rec); err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	if _, err := s.f.Write(buf); err != nil {
		// A partial write leaves a torn tail; cut it now so the file stays a
		// valid log (recovery would do the same at the next open).
		if terr := s.f.Truncate(s.size); terr == nil {
			_, _ = s.f.Seek(s.size, io.SeekStart)
		}
		return nil, fmt.Errorf("logstore: append: %w", err)
	}
	off := s.size
	for _, r := range out {
		n := uint32(headerSize + 10 + len(r.CorrelationID) + 3 + len(r.EventType) + len(r.ContentHash) + len(r.PrevHash) + len(r.Data))
		s.index(r, off, n)
		off += int64(n)
	}
	s.size = off
	if cap(buf) <= 1<<20 {
		s.buf = buf
	}
	s.written.Store(s.seq)
	return out, nil
}

// Sync implements evidence.Store with group commit: the first caller runs
// fsync for everything written so far while later callers wait for it (or
// the next one).
func (s *Store) Sync(ctx context.Context, seq uint64) error {
	if s.opts.NoSync {
		return nil
	}
	s.smu.Lock()
	for s.synced < seq {
		if s.syncErr != nil {
			err := s.syncErr
			s.smu.Unlock()
			return err
		}
		if !s.syncing {
			s.syncing = true
			target := s.written.Load()
			s.smu.Unlock()
			err := s.f.Sync()
			s.smu.Lock()
			s.syncing = false
			if err != nil {
				// fsync failure leaves the page cache state unknown; refuse
				// every later durability promise (the fsyncgate lesson).
				s.syncErr = fmt.Errorf("logstore: fsync: %w", err)
			} else if target > s.synced {
				s.synced = target
			}
			close(s.done)
			s.done = make(chan struct{})
			continue
		}
		done := s.done
		s.smu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
		s.smu.Lock()
	}
	s.smu.Unlock()
	return nil
}

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
	locs := append([]int64(nil), c.Locs[from:to]...)
	sizes := append([]uint32(nil), c.Sizes[from:to]...)
	s.mu.RUnlock()

	out := make([]evidence.Record, 0, len(locs))
	// Records of one correlation are often adjacent: read runs in one pread.
	for i := 0; i < len(locs); {
		j := i + 1
		end := locs[i] + int64(sizes[i])
		for j < len(locs) && locs[j] == end && end-locs[i] < 1<<20 {
			end += int64(sizes[j])
			j++
		}
		buf := make([]byte, end-locs[i])
		if _, err := s.f.ReadAt(buf, locs[i]); err != nil {
			return nil, fmt.Errorf("logstore: replay read at %d: %w", locs[i], err)
		}
		for k := i; k < j; k++ {
			n := sizes[k]
			rec, err := decodeBody(buf[headerSize:n])
			if err != nil {
				return nil, fmt.Errorf("logstore: record at %d: %w", locs[k], err)
			}
			out = append(out, rec)
			buf = buf[n:]
		}
		i = j
	}
	return out, nil
}

// Count implements evidence.Store.
func (s *Store) Count(ctx context.Context, correlationID, eventType string) (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
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

// Close syncs and closes the file.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.f.Sync()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return err
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
