package logstore

import (
	"fmt"
	"path/filepath"
	"sort"
	"sync"

	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/logstore/internal/format"
	"github.com/capmesh/capmesh/evidence/logstore/internal/packed"
)

// Records are indexed by their logical offset: the place of their
// version 1 encoding in the concatenation of every record the store holds,
// which is what Append knows before a commit decides how records are
// framed. Segments map logical ranges to the file: a run of uncompressed
// frames (logical and file offsets advance together), or one block.
type segment struct {
	l     int64 // logical start
	p     int64 // file offset: of the run, or of the block's frame
	n     int64 // logical length (a run: its file length too)
	frame int64 // a block's frame length; 0 for a run
}

func (g segment) block() bool { return g.frame > 0 }

// addRun records n uncompressed bytes at logical l and file offset p,
// extending the last run when they follow it.
func addRun(segs []segment, l, p, n int64) []segment {
	if k := len(segs) - 1; k >= 0 && !segs[k].block() && segs[k].l+segs[k].n == l && segs[k].p+segs[k].n == p {
		segs[k].n += n
		return segs
	}
	return append(segs, segment{l: l, p: p, n: n})
}

// segmentAt returns the segment holding logical offset l; call with mu
// held.
func (s *Store) segmentAt(l int64) (segment, bool) {
	i := sort.Search(len(s.segs), func(i int) bool { return s.segs[i].l > l }) - 1
	if i < 0 || l >= s.segs[i].l+s.segs[i].n {
		return segment{}, false
	}
	return s.segs[i], true
}

// reader reads records by logical offset for one call, keeping the last
// block it decompressed in a buffer from blockBufs; close returns it.
type reader struct {
	s      *Store
	blkAt  int64  // file offset of the block in raw; -1 none
	raw    []byte // its records: version 1 encoding, or packed
	packed bool
	buf    *[]byte
	frame  []byte // the last block frame read; raw does not alias it
}

// blockBufs are buffers blocks are decompressed into by reads: a replay
// copies out the records it returns, so that it allocates what it
// returns, not the blocks around it.
var blockBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2*format.BlockTarget); return &b }}

func newReader(s *Store) *reader { return &reader{s: s, blkAt: -1} }

func (r *reader) close() {
	if r.buf != nil {
		blockBufs.Put(r.buf)
		r.buf, r.raw = nil, nil
	}
}

// record returns the body of the record of size n at logical loc in g,
// verified.
func (r *reader) record(g segment, loc int64, n uint32) ([]byte, error) {
	if g.block() {
		bodies, err := r.blockRecords(g, []evidence.ChainEntry{{Loc: loc, Size: n}})
		if err != nil {
			return nil, err
		}
		return bodies[0], nil
	}
	buf := make([]byte, n)
	off := g.p + loc - g.l
	if _, err := r.s.f.ReadAt(buf, off); err != nil {
		return nil, fmt.Errorf("logstore: read at %d: %w", off, err)
	}
	return r.s.verified(buf, off)
}

// blockRecords returns the bodies of the records ents (ascending logical
// offsets, all in the block of g), verified, copied out into one new
// buffer. Of a packed block (format version 3) only those records are
// unpacked, in one walk.
func (r *reader) blockRecords(g segment, ents []evidence.ChainEntry) ([][]byte, error) {
	if r.blkAt != g.p {
		if err := r.load(g); err != nil {
			return nil, err
		}
	}
	total := 0
	for _, e := range ents {
		total += int(e.Size)
	}
	buf := make([]byte, 0, total)
	bodies := make([][]byte, 0, len(ents))
	var p int
	var off int64
	for _, e := range ents {
		at, start := e.Loc-g.l, len(buf)
		var err error
		switch {
		case r.packed:
			buf, p, off, err = packed.Record(buf, r.raw, p, off, at, e.Size)
		case at < 0 || at+int64(e.Size) > int64(len(r.raw)):
			err = fmt.Errorf("%w: no record at %d", format.ErrBlock, at)
		default:
			buf = append(buf, r.raw[at:at+int64(e.Size)]...)
		}
		if err != nil {
			return nil, r.damaged(g, err)
		}
		body, err := r.s.verified(buf[start:len(buf):len(buf)], g.p)
		if err != nil {
			return nil, err
		}
		bodies = append(bodies, body)
	}
	return bodies, nil
}

// load reads the block of g and decodes it: a version 2 block to its
// records, a version 3 block to its packed records.
func (r *reader) load(g segment) error {
	if cap(r.frame) < int(g.frame) {
		r.frame = make([]byte, g.frame)
	}
	frame := r.frame[:g.frame]
	if _, err := r.s.f.ReadAt(frame, g.p); err != nil {
		return fmt.Errorf("logstore: read at %d: %w", g.p, err)
	}
	body, err := r.s.verified(frame, g.p)
	if err != nil {
		return err
	}
	if r.buf == nil {
		r.buf = blockBufs.Get().(*[]byte)
	}
	n, err := format.BlockRawLen(body)
	if err == nil && int64(n) != g.n {
		err = fmt.Errorf("%d raw bytes where %d were indexed", n, g.n)
	}
	var raw []byte
	if err == nil {
		if r.packed = format.IsPacked(body); r.packed {
			raw, err = format.DecodePacked(*r.buf, body, n)
		} else {
			raw, err = format.DecodeZstd(*r.buf, body, n)
		}
	}
	if err != nil {
		r.blkAt = -1
		return r.damaged(g, err)
	}
	if cap(raw) > cap(*r.buf) && cap(raw) <= 2*format.MaxBlockRaw {
		*r.buf = raw[:0]
	}
	r.blkAt, r.raw = g.p, raw
	return nil
}

// damaged is the error for the block of g, whose frame verified, not
// decoding (err).
func (r *reader) damaged(g segment, err error) error {
	return fmt.Errorf("%w: the block at offset %d of %s does not decode (%v); stop the host and run `capmesh evidence check %s`",
		ErrDamaged, g.p, filepath.Join(r.s.dir, FileName), err, r.s.dir)
}
